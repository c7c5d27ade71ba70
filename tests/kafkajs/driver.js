// Drives KafkaJS (unmodified, from npm) against a broker for tests/integration/test_kafkajs.py.
//
//   node driver.js SPEC.json     prints one JSON result line on stdout
//
// SPEC: {"command": ..., "brokers": ["host:port"], ...command arguments}.  Keys, values and
// header values travel as base64 strings (null stays null).  KafkaJS's own log goes to stderr
// (level WARN unless SPEC.logLevel says otherwise), so stdout carries only the result.
'use strict'

const fs = require('fs')
const { Kafka, CompressionTypes, ConfigResourceTypes, Partitioners, logLevel } = require('kafkajs')

const spec = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))

const b64 = (buf) => (buf === null || buf === undefined ? null : Buffer.from(buf).toString('base64'))
const unb64 = (s) => (s === null || s === undefined ? null : Buffer.from(s, 'base64'))

const kafka = new Kafka({
  clientId: spec.clientId || 'odradek-kafkajs-test',
  brokers: spec.brokers,
  connectionTimeout: 10000,
  requestTimeout: 30000,
  retry: { retries: 8, initialRetryTime: 200 },
  logLevel: logLevel[spec.logLevel || 'WARN'],
  logCreator: () => ({ namespace, level, label, log }) => {
    process.stderr.write(`[kafkajs ${label}] ${namespace}: ${log.message} ${JSON.stringify(log)}\n`)
  }
})

const COMPRESSION = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }

function toMessage (r) {
  const headers = {}
  for (const [k, v] of r.headers) headers[k] = unb64(v)
  return { key: unb64(r.key), value: unb64(r.value), headers, timestamp: String(r.timestamp) }
}

function fromMessage (topic, partition, m) {
  const headers = []
  for (const [k, v] of Object.entries(m.headers || {})) headers.push([k, b64(v)])
  return {
    topic,
    partition,
    offset: Number(m.offset),
    key: b64(m.key),
    value: b64(m.value),
    headers,
    timestamp: Number(m.timestamp)
  }
}

// Sends spec.records in chunks of spec.chunk through one producer (or transaction); returns,
// per record, [partition, offset] (offset -1 with acks=0, where the broker answers nothing).
async function sendAll (sender, topic, records, { acks, compression, chunk }) {
  const acked = []
  for (let i = 0; i < records.length; i += chunk) {
    const part = records.slice(i, i + chunk)
    const meta = await sender.send({
      topic,
      acks,
      compression: COMPRESSION[compression || 'none'],
      messages: part.map(toMessage)
    })
    if (acks === 0) {
      for (let j = 0; j < part.length; j++) acked.push([-1, -1])
      continue
    }
    // KafkaJS answers one entry per partition with the batch's base offset; the records of
    // one send keep their order within a partition.  Which partition each record went to is
    // the partitioner's choice: recompute it the way the producer did.
    const next = new Map(meta.map((m) => [m.partition, Number(m.baseOffset)]))
    for (const r of part) {
      const p = r._partition
      acked.push([p, next.get(p)])
      next.set(p, next.get(p) + 1)
    }
  }
  return acked
}

// KafkaJS's default partitioner (Java-compatible murmur2), applied the way the producer does,
// so each record's partition is known for the offsets above.
function assignPartitions (records, partitionCount, topic) {
  const partitioner = Partitioners.DefaultPartitioner()
  const partitionMetadata = Array.from({ length: partitionCount }, (_, i) => ({ partitionId: i, leader: 0 }))
  for (const r of records) {
    r._partition = partitioner({ topic, partitionMetadata, message: { key: unb64(r.key), value: null } })
  }
}

async function produce () {
  const producer = kafka.producer({
    idempotent: !!spec.idempotent,
    maxInFlightRequests: spec.idempotent ? 5 : undefined,
    createPartitioner: Partitioners.DefaultPartitioner,
    allowAutoTopicCreation: spec.allowAutoTopicCreation !== false
  })
  await producer.connect()
  try {
    assignPartitions(spec.records, spec.partitions, spec.topic)
    const acked = await sendAll(producer, spec.topic, spec.records, {
      acks: spec.acks, compression: spec.compression, chunk: spec.chunk || 500
    })
    return { acked }
  } finally {
    await producer.disconnect()
  }
}

// A consumer group member that reads until spec.count records arrived (or spec.timeoutMs
// passed), commits and leaves.
async function consume () {
  const consumer = kafka.consumer({
    groupId: spec.groupId,
    readUncommitted: !!spec.readUncommitted,
    sessionTimeout: spec.sessionTimeout || 10000,
    heartbeatInterval: 500,
    maxWaitTimeInMs: 200
  })
  await consumer.connect()
  const records = []
  const assignments = []     // [epoch ms, partitions] of every assignment this member got
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    assignments.push([Date.now(), Object.values(e.payload.memberAssignment).flat().sort((a, b) => a - b)])
  })
  try {
    await consumer.subscribe({ topics: [spec.topic], fromBeginning: spec.fromBeginning !== false })
    let done
    const finished = new Promise((resolve) => { done = resolve })
    await consumer.run({
      autoCommit: true,
      eachMessage: async ({ topic, partition, message }) => {
        records.push(fromMessage(topic, partition, message))
        if (records.length >= spec.count) done()
      }
    })
    const timer = new Promise((resolve) => setTimeout(resolve, spec.timeoutMs || 60000))
    await Promise.race([finished, timer])
    if (spec.lingerMs) await new Promise((resolve) => setTimeout(resolve, spec.lingerMs))
    await consumer.commitOffsets([])   // flushes what autoCommit resolved so far
  } finally {
    await consumer.disconnect()
  }
  return { records, assignments }
}

// One transactional producer: each step of spec.transactions is {"records": [...],
// "end": "commit"|"abort", "offsets": {groupId, topics}?}.
async function transactions () {
  const producer = kafka.producer({
    transactionalId: spec.transactionalId,
    idempotent: true,
    maxInFlightRequests: 1,
    createPartitioner: Partitioners.DefaultPartitioner
  })
  await producer.connect()
  const results = []
  try {
    for (const t of spec.transactions) {
      assignPartitions(t.records, spec.partitions, spec.topic)
      const txn = await producer.transaction()
      const acked = await sendAll(txn, spec.topic, t.records, { acks: -1, compression: 'none', chunk: 100 })
      if (t.offsets) await txn.sendOffsets(t.offsets)
      if (t.end === 'commit') await txn.commit()
      else await txn.abort()
      results.push({ acked })
    }
  } finally {
    await producer.disconnect()
  }
  return { results }
}

async function admin () {
  const a = kafka.admin()
  await a.connect()
  const out = []
  try {
    for (const op of spec.ops) {
      try {
        out.push({ ok: (await adminOp(a, op)) ?? null })   // undefined would vanish from the JSON
      } catch (e) {
        out.push({ error: e.type || e.name, message: e.message, retriable: !!e.retriable })
      }
    }
  } finally {
    await a.disconnect()
  }
  return { results: out }
}

async function adminOp (a, op) {
  switch (op.op) {
    case 'createTopics':
      return a.createTopics({ topics: op.topics, validateOnly: !!op.validateOnly, waitForLeaders: op.waitForLeaders !== false })
    case 'listTopics':
      return (await a.listTopics()).sort()
    case 'fetchTopicMetadata':
      return a.fetchTopicMetadata({ topics: op.topics })
    case 'deleteTopics':
      return a.deleteTopics({ topics: op.topics })
    case 'createPartitions':
      return a.createPartitions({ topicPartitions: op.topicPartitions })
    case 'describeConfigs':
      return a.describeConfigs({
        includeSynonyms: !!op.includeSynonyms,
        resources: op.resources.map((r) => ({ ...r, type: ConfigResourceTypes[r.type] }))
      })
    case 'alterConfigs':
      return a.alterConfigs({
        validateOnly: false,
        resources: op.resources.map((r) => ({ ...r, type: ConfigResourceTypes[r.type] }))
      })
    case 'fetchTopicOffsets':
      return a.fetchTopicOffsets(op.topic)
    case 'fetchTopicOffsetsByTimestamp':
      return a.fetchTopicOffsetsByTimestamp(op.topic, op.timestamp)
    case 'deleteTopicRecords':
      return a.deleteTopicRecords({ topic: op.topic, partitions: op.partitions })
    case 'describeCluster':
      return a.describeCluster()
    case 'listGroups':
      return a.listGroups()
    case 'describeGroups':
      return a.describeGroups(op.groupIds)
    case 'fetchOffsets':
      return a.fetchOffsets({ groupId: op.groupId, topics: op.topics })
    case 'resetOffsets':
      return a.resetOffsets({ groupId: op.groupId, topic: op.topic, earliest: !!op.earliest })
    case 'setOffsets':
      return a.setOffsets({ groupId: op.groupId, topic: op.topic, partitions: op.partitions })
    case 'deleteGroups':
      return a.deleteGroups(op.groupIds)
    default:
      throw new Error(`unknown admin op ${op.op}`)
  }
}

const COMMANDS = { produce, consume, transactions, admin }

COMMANDS[spec.command]()
  .then((result) => {
    // exit only once the (possibly large) result has left: a pipe's write is asynchronous
    process.stdout.write(JSON.stringify(result) + '\n', () => process.exit(0))
  })
  .catch((e) => {
    const fatal = { fatal: e.type || e.name, message: e.message, stack: e.stack }
    process.stdout.write(JSON.stringify(fatal) + '\n', () => process.exit(1))
  })
