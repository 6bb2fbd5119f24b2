// A kafkajs member of a consumer group that stays in the group (tests/cli/test_consumer_groups_tool.py):
// it consumes __cluster_metadata from the beginning, commits the offset after its first
// message, pauses the partition (so it commits nothing more) and prints one JSON line
// {"committed": N}; it leaves the group when its standard input closes.
//
// usage: node kafkajs_member.js HOST:PORT[,HOST:PORT...] GROUP CLIENT_ID
const { Kafka, logLevel } = require('kafkajs')

const [brokers, groupId, clientId] = process.argv.slice(2)
const topic = '__cluster_metadata'
const kafka = new Kafka({ clientId, brokers: brokers.split(','), logLevel: logLevel.NOTHING })

async function main () {
  const consumer = kafka.consumer({ groupId, rebalanceTimeout: 10000, sessionTimeout: 10000 })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  let done = false
  const committed = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no message within 60 s')), 60000)
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message, pause }) => {
        if (done) return
        done = true
        clearTimeout(timer)
        const next = Number(message.offset) + 1
        await consumer.commitOffsets([{ topic, partition, offset: String(next) }])
        pause()
        resolve(next)
      }
    }).catch(reject)
  })
  console.log(JSON.stringify({ committed }))
  process.stdin.resume()
  await new Promise(resolve => process.stdin.on('end', resolve))
  await consumer.disconnect()
}

main().catch(e => { console.error(e); process.exit(1) })
