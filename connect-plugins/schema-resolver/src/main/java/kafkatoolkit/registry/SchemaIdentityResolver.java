package kafkatoolkit.registry;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.avro.generic.GenericContainer;

import io.apicurio.registry.resolver.DefaultSchemaResolver;
import io.apicurio.registry.resolver.SchemaLookupResult;
import io.apicurio.registry.resolver.SchemaParser;
import io.apicurio.registry.resolver.data.Record;
import io.apicurio.registry.serde.data.KafkaSerdeMetadata;

/**
 * Apicurio's default resolver, answering again from memory for a record whose Avro schema is the
 * very object it resolved before.
 *
 * <p>With auto-registration on, {@link DefaultSchemaResolver} renders each record's schema to JSON
 * and looks the string up in its cache, for every record: on a Debezium change record (a schema of
 * some kilobytes) that was most of the Connect task thread's time (a JFR profile of a 1M-row Avro
 * snapshot: 72 % of its samples in the resolver, 49 % in {@code Schema.toString}). The converter
 * turns equal Connect schemas into one Avro schema object, so that object, with the topic and
 * whether it is the key, names the lookup: a record of a new schema (a table's ADD COLUMN) is a new
 * object and goes through the default resolver, which registers it. A remembered answer is
 * re-asked once it is older than the registry check period, as the default resolver's own cache is.
 */
public class SchemaIdentityResolver<S, T> extends DefaultSchemaResolver<S, T> {

    // Tables x {key, value} of one connector; past this the memory starts again from empty.
    static final int MAX_SCHEMAS = 10_000;

    private record Key(Object schema, String topic, boolean isKey) {
        @Override
        public boolean equals(Object o) {
            return o instanceof Key k && k.schema == schema && k.isKey == isKey && k.topic.equals(topic);
        }

        @Override
        public int hashCode() {
            return System.identityHashCode(schema) * 31 + topic.hashCode() + (isKey ? 1 : 0);
        }
    }

    private record Known<S>(SchemaLookupResult<S> result, long at) {}

    private final Map<Key, Known<S>> known = new ConcurrentHashMap<>();
    private long lifetimeNanos = Duration.ofSeconds(30).toNanos();

    @Override
    public void configure(Map<String, ?> configs, SchemaParser<S, T> schemaParser) {
        super.configure(configs, schemaParser);
        lifetimeNanos = config.getCheckPeriod().toNanos();
    }

    @Override
    public SchemaLookupResult<S> resolveSchema(Record<T> data) {
        Key key = keyOf(data);
        if (key == null) {
            return super.resolveSchema(data);
        }
        long now = System.nanoTime();
        Known<S> hit = known.get(key);
        if (hit != null && now - hit.at() < lifetimeNanos) {
            return hit.result();
        }
        SchemaLookupResult<S> result = super.resolveSchema(data);
        if (known.size() >= MAX_SCHEMAS) {
            known.clear();
        }
        known.put(key, new Known<>(result, now));
        return result;
    }

    @Override
    public void reset() {
        known.clear();
        super.reset();
    }

    private static Key keyOf(Record<?> data) {
        if (data.payload() instanceof GenericContainer record
                && data.metadata() instanceof KafkaSerdeMetadata kafka && kafka.getTopic() != null) {
            return new Key(record.getSchema(), kafka.getTopic(), kafka.isKey());
        }
        return null;
    }
}
