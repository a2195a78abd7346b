// When the stats route of the host half (frontends/dsh/plugin.mjs) says `recalling`: for the
// auto-recall call only, from its start to its end (D6), and how its long poll answers.
// A fake cordis context that offers `connection`, and the fake worker of
// tests/fixtures/dsh_plugin with FAKE_CONTEXT_SLEEP (a recall that takes a while).
// node host_recalling.mjs PLUGIN_URL CONFIG_JSON; prints one JSON line.
const [plugin, configJson] = process.argv.slice(2)
const { apply } = await import(plugin)
const keepAlive = setInterval(() => {}, 1000)
const listeners = new Map()
const disposers = []
const routes = new Map()
const ctx = {
  on (name, fn) { listeners.set(name, fn); return () => listeners.delete(name) },
  logger: { warn: () => {} },
  get: () => undefined,
  effect (fn) { disposers.push(fn()) },
  inject (names, fn) {
    if (names.includes('connection')) fn({ connection: { fetch: { register: (r) => { routes.set(r.path, r) } } } })
  }
}
apply(ctx, JSON.parse(configJson))
const route = routes.get('/api/dsh-recall/stats')
const read = async (wait) => (await route.fetch(new Request(`http://127.0.0.1/api/dsh-recall/stats${wait ? `?wait=${wait}` : ''}`))).json()
const key = (s) => `${s.recalling ? 1 : 0}:${s.lastDoneAt}`
const session = { id: 'sess-1', header: { cwd: process.cwd() } }
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const order = []
const out = {}
await sleep(400) // the worker's ready line
out.before = await read()

// An offload is not a recall: no sweep for it, before or after.
const exec = { name: 'bash', callId: 'call-1', agent: { session } }
await listeners.get('tools/post-execute')(exec, { content: [{ type: 'text', text: 'x'.repeat(5000) }] }, async () => ({ kind: 'accept' }))
out.afterOffload = await read()

// A long poll from before the recall: answered when the recall starts.
const idle = key(out.afterOffload)
const startPoll = read(idle).then((s) => { order.push('start-answered'); return s })
// The turn's auto-recall (agent/pre-step with a new user message).
const payload = {
  agent: { session },
  step: 2,
  turn: 1,
  messages: [{ id: 'm1', role: 'user', content: [{ type: 'text', text: 'what did we decide about the cache?' }] }]
}
const recall = listeners.get('agent/pre-step')(payload, async () => ({ kind: 'accept', messages: [{ role: 'assistant', content: [] }] }))
  .then((d) => { order.push('recall-ended'); return d })
out.atStart = await startPoll
// A long poll while it runs: answered when it ends.
const endPoll = read(key(out.atStart)).then((s) => { order.push('end-answered'); return s })
out.during = await read()
const decision = await recall
out.atEnd = await endPoll
out.added = decision.messages.length
// Nothing changes: the long poll is answered after its period, with the same state.
out.quiet = await read(key(out.atEnd))
out.order = order
for (const d of disposers) d?.()
clearInterval(keepAlive)
console.log(JSON.stringify(out))
process.exit(0)
