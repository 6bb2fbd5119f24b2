// kafkajs consuming __cluster_metadata with a group against a kraft cluster
// (tests/groups/test_real_clients.py runs it): a first member consumes a few records and
// commits the offset after the last; a second member of the same group then starts where
// that commit says. kafkajs cannot consume without a group. Prints one JSON object.
//
// usage: node kafkajs_group.js HOST:PORT[,HOST:PORT...] GROUP [SECURITY_JSON]
// SECURITY_JSON, for a SASL_SSL listener: {"ca": PEM file, "mechanism": "scram-sha-512",
// "username": ..., "password": ...}
const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const [brokers, groupId, securityJson] = process.argv.slice(2)
const topic = '__cluster_metadata'
const security = securityJson ? JSON.parse(securityJson) : null
const secured = security
  ? {
      ssl: { ca: [fs.readFileSync(security.ca, 'utf-8')] },
      sasl: { mechanism: security.mechanism, username: security.username, password: security.password }
    }
  : {}
const kafka = new Kafka({
  clientId: 'kraft-test-kafkajs', brokers: brokers.split(','), logLevel: logLevel.NOTHING, ...secured
})

// One member: the first message it is given (offset, leader epoch), committed +1 if `commit`.
async function member (commit) {
  const consumer = kafka.consumer({ groupId, rebalanceTimeout: 10000, sessionTimeout: 10000 })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  const first = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no message within 60 s')), 60000)
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        clearTimeout(timer)
        if (commit) {
          await consumer.commitOffsets([{ topic, partition, offset: String(Number(message.offset) + 1) }])
        }
        resolve({ offset: Number(message.offset) })
      }
    }).catch(reject)
  })
  await consumer.disconnect()
  return first
}

async function main () {
  const first = await member(true)
  const admin = kafka.admin()
  await admin.connect()
  const committed = await admin.fetchOffsets({ groupId, topics: [topic] })
  await admin.disconnect()
  const second = await member(false)
  console.log(JSON.stringify({ first, committed, second }))
}

main().catch(e => { console.error(e); process.exit(1) })
