// The stats route of the host half (frontends/dsh/plugin.mjs) under plain Node: a fake cordis
// context that offers `connection`, and the fake worker of tests/fixtures/dsh_plugin. One
// quick offload, then the route is read at once and again after the recent-call window, then
// once more after a second call.
// node host_stats.mjs PLUGIN_URL CONFIG_JSON; prints one JSON line.
const [plugin, configJson] = process.argv.slice(2)
const { apply } = await import(plugin)
const keepAlive = setInterval(() => {}, 1000)
const listeners = new Map()
const disposers = []
let route = null
const ctx = {
  on (name, fn) { listeners.set(name, fn); return () => listeners.delete(name) },
  logger: { warn: () => {} },
  get: () => undefined,
  effect (fn) { disposers.push(fn()) },
  inject (names, fn) {
    if (names.includes('connection')) fn({ connection: { fetch: { register: (r) => { if (r.path === '/api/dsh-recall/stats') route = r } } } })
  }
}
apply(ctx, JSON.parse(configJson))
const read = async () => (await route.fetch()).json()
const session = { id: 'sess-1', header: { cwd: process.cwd() } }
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const out = { before: await read() }
await sleep(300) // the worker's ready line
const exec = { name: 'bash', callId: 'call-1', agent: { session } }
const t0 = Date.now()
await listeners.get('tools/post-execute')(exec, { content: [{ type: 'text', text: 'x'.repeat(5000) }] }, async () => ({ kind: 'accept' }))
out.callMs = Date.now() - t0
await sleep(1000) // the call is long over, one poll later
out.afterPoll = await read()
await sleep(2300)
out.later = await read()
// Another call: with a worker that died meanwhile (FAKE_MODE=die) it is answered by no one.
await listeners.get('tools/post-execute')({ ...exec, callId: 'call-2' }, { content: [{ type: 'text', text: 'y'.repeat(5000) }] }, async () => ({ kind: 'accept' }))
out.afterDead = await read()
for (const d of disposers) d?.()
clearInterval(keepAlive)
console.log(JSON.stringify(out))
process.exit(0)
