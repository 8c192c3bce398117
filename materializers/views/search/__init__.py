"""Internal: the search view's two backends, an embedded Tantivy index and an OpenSearch index."""
