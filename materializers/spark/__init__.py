"""Internal: the driver's Spark session (jars, JVM options, the class archive) and its memory.

Modules here may move without notice; `materializers.run` builds the session for you.
"""
