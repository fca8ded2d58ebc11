// KafkaJS against a real tidelog broker: admin, an idempotent producer, a transaction
// committed and one aborted, a consumer group reading committed records, its committed
// offsets, DescribeConfigs with synonyms and DeleteRecords. Prints one JSON line of what
// the broker answered; the pytest beside it checks it.
const { Kafka, logLevel } = require('kafkajs')

const [broker, topic, group] = process.argv.slice(2)
const kafka = new Kafka({ clientId: 'tidelog-smoke', brokers: [broker], logLevel: logLevel.NOTHING })

async function produce() {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  for (let i = 0; i < 200; i += 20) {
    const messages = Array.from({ length: 20 }, (_, j) => ({ key: `k${(i + j) % 7}`, value: `plain-${i + j}` }))
    await producer.send({ topic, acks: -1, messages })
  }
  await producer.disconnect()
  const txProducer = kafka.producer({ transactionalId: `${topic}-tx`, idempotent: true, maxInFlightRequests: 1 })
  await txProducer.connect()
  for (const [outcome, n] of [['commit', 10], ['abort', 10]]) {
    const tx = await txProducer.transaction()
    await tx.send({ topic, messages: Array.from({ length: n }, (_, j) => ({ key: 'tx', value: `${outcome}-${j}` })) })
    await (outcome === 'commit' ? tx.commit() : tx.abort())
  }
  await txProducer.disconnect()
}

async function consume(expected) {
  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 10000 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const seen = []
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`only ${seen.length} of ${expected} records in 60 s`)), 60000)
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        seen.push({ partition, offset: message.offset, value: message.value.toString() })
        if (seen.length === expected) { clearTimeout(timer); resolve() }
      },
    })
  })
  await consumer.stop()  // commits what it consumed
  await consumer.disconnect()
  return seen
}

async function main() {
  const admin = kafka.admin()
  await admin.connect()
  const created = await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true })
  await produce()
  const seen = await consume(210)
  const committed = await admin.fetchOffsets({ groupId: group, topics: [topic] })
  const ends = await admin.fetchTopicOffsets(topic)
  const configs = await admin.describeConfigs({
    includeSynonyms: true,
    resources: [{ type: 2, name: topic, configNames: ['retention.ms', 'compression.type'] }],
  })
  await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '-1' }] })
  const afterDelete = await admin.fetchTopicOffsets(topic)
  await admin.disconnect()
  console.log(JSON.stringify({
    created,
    values: seen.map(r => r.value),
    partitions: seen.map(r => [r.partition, Number(r.offset)]),
    committed: committed[0].partitions.map(p => [p.partition, p.offset]),
    ends: ends.map(p => [p.partition, p.offset, p.high, p.low]),
    configs: configs.resources[0].configEntries.map(c => [c.configName, c.configValue, c.configSource, c.configSynonyms.map(s => [s.configName, s.configValue, s.configSource])]),
    afterDelete: afterDelete.map(p => [p.partition, p.low, p.high]),
  }))
}

main().catch(e => { console.error(e && e.stack || e); process.exit(1) })
