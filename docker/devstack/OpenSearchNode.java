// A single OpenSearch node in this JVM, from the Maven Central jars (no distribution, no Docker).
//
// Usage: java -cp <opensearch lib>/*:<this class's dir> OpenSearchNode key=value...
// Every argument is a node setting (path.home, path.data, http.port, ...). devstack.opensearch
// compiles this file with javac at fetch time and starts it as the `opensearch` service.
//
// Why a subclass: the Node constructor that takes plugin classes is protected. The distribution loads
// its modules (the HTTP transport, analysis-common, Painless) from a modules/ directory; here they are
// on the classpath and handed over by class. SIGTERM runs the shutdown hook, which closes the node.

import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.opensearch.analysis.common.CommonAnalysisPlugin;
import org.opensearch.common.logging.LogConfigurator;
import org.opensearch.common.settings.Settings;
import org.opensearch.env.Environment;
import org.opensearch.node.InternalSettingsPreparer;
import org.opensearch.node.Node;
import org.opensearch.painless.PainlessPlugin;
import org.opensearch.plugins.Plugin;
import org.opensearch.transport.Netty4Plugin;

public final class OpenSearchNode extends Node {
    private static final List<Class<? extends Plugin>> PLUGINS =
            Arrays.asList(Netty4Plugin.class, CommonAnalysisPlugin.class, PainlessPlugin.class);

    private OpenSearchNode(Environment environment, Collection<Class<? extends Plugin>> plugins) {
        super(environment, plugins, true);
    }

    public static void main(String[] args) throws Exception {
        Settings.Builder builder = Settings.builder();
        for (String arg : args) {
            int eq = arg.indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("expected key=value, got: " + arg);
            }
            builder.put(arg.substring(0, eq), arg.substring(eq + 1));
        }
        Settings settings = builder.build();
        LogConfigurator.configureWithoutConfig(settings);
        Environment environment = InternalSettingsPreparer.prepareEnvironment(
                settings, Collections.emptyMap(), null, () -> settings.get("node.name", "devstack"));
        Node node = new OpenSearchNode(environment, PLUGINS).start();
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                node.close();
                node.awaitClose(20, TimeUnit.SECONDS);
            } catch (Exception e) {
                e.printStackTrace();
            } finally {
                closed.countDown();
            }
        }, "opensearch-shutdown"));
        closed.await();
    }
}
