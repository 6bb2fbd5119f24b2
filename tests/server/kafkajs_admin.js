// kafkajs's admin client against one kraft node (tests/server/test_admin_clients.py runs it):
// create a topic, add partitions (and try to shrink them), replace the topic's configs with
// the legacy AlterConfigs, change a broker config, then describe both. Prints what it got as
// one JSON object; the test checks it, and the cluster's metadata from another node.
//
// usage: node kafkajs_admin.js HOST:PORT TOPIC BROKER_ID
const { Kafka, ConfigResourceTypes, logLevel } = require('kafkajs')

const [broker, topic, brokerId] = process.argv.slice(2)

async function main () {
  const kafka = new Kafka({ clientId: 'kraft-test-kafkajs', brokers: [broker], logLevel: logLevel.NOTHING })
  const admin = kafka.admin()
  await admin.connect()
  try {
    const created = await admin.createTopics({
      topics: [{ topic, numPartitions: 1, replicationFactor: 2, configEntries: [{ name: 'retention.ms', value: '3600000' }] }],
      timeout: 30000
    })
    await admin.createPartitions({ topicPartitions: [{ topic, count: 3 }], timeout: 30000 })
    let shrinking = null
    try {
      await admin.createPartitions({ topicPartitions: [{ topic, count: 2 }], timeout: 30000 })
    } catch (e) {
      shrinking = (e.errors || [e]).map(x => x.type || x.message)
    }
    await admin.alterConfigs({
      validateOnly: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries: [{ name: 'cleanup.policy', value: 'compact' }] }]
    })
    await admin.alterConfigs({
      validateOnly: false,
      resources: [{ type: ConfigResourceTypes.BROKER, name: brokerId, configEntries: [{ name: 'message.max.bytes', value: '2000000' }] }]
    })
    const described = await admin.describeConfigs({
      includeSynonyms: true,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }, { type: ConfigResourceTypes.BROKER, name: brokerId }]
    })
    const metadata = await admin.fetchTopicMetadata({ topics: [topic] })
    console.log(JSON.stringify({ created, shrinking, described, metadata }))
  } finally {
    await admin.disconnect()
  }
}

main().catch(e => {
  console.error(e)
  process.exit(1)
})
