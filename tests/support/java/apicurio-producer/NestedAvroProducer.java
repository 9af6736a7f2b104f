import java.util.Map;
import java.util.Properties;

import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Writes nested Avro orders to a topic with Apicurio's serializer, as a Java user's producer would.
 * Arguments: bootstrap servers, the registry's base URL (http://host:port), the topic, the number of orders.
 * Order i ships to "FR" when i is even, else "DE", and has one item, "s" + i; its key is "java-i".
 */
public class NestedAvroProducer {
    static final String ORDER = """
        {"type": "record", "name": "JavaOrder", "namespace": "shop.java", "fields": [
          {"name": "id", "type": "long"},
          {"name": "customer", "type": {"type": "record", "name": "JavaCustomer", "fields": [
            {"name": "name", "type": "string"},
            {"name": "address", "type": {"type": "record", "name": "JavaAddress", "fields": [
              {"name": "country", "type": "string"}]}}]}},
          {"name": "items", "type": {"type": "array", "items": {"type": "record", "name": "JavaItem", "fields": [
            {"name": "sku", "type": "string"}]}}},
          {"name": "labels", "type": {"type": "map", "values": "string"}}]}""";

    public static void main(String[] args) throws Exception {
        Schema order = new Schema.Parser().parse(ORDER);
        Schema customer = order.getField("customer").schema();
        Schema address = customer.getField("address").schema();
        Schema item = order.getField("items").schema().getElementType();
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", "io.apicurio.registry.serde.avro.AvroKafkaSerializer");
        props.put("apicurio.registry.url", args[1] + "/apis/registry/v3");
        props.put("apicurio.registry.auto-register", "true");
        props.put("acks", "all");
        int n = Integer.parseInt(args[3]);
        try (KafkaProducer<String, Object> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < n; i++) {
                GenericRecord a = new GenericData.Record(address);
                a.put("country", i % 2 == 0 ? "FR" : "DE");
                GenericRecord c = new GenericData.Record(customer);
                c.put("name", "java" + i);
                c.put("address", a);
                GenericData.Array<GenericRecord> items = new GenericData.Array<>(1, order.getField("items").schema());
                GenericRecord it = new GenericData.Record(item);
                it.put("sku", "s" + i);
                items.add(it);
                GenericRecord o = new GenericData.Record(order);
                o.put("id", (long) i);
                o.put("customer", c);
                o.put("items", items);
                o.put("labels", Map.of("channel", "java"));
                producer.send(new ProducerRecord<>(args[2], "java-" + i, o)).get();
            }
        }
        System.out.println("sent " + n);
    }
}
