// Unit test of the dsh browser half (frontends/dsh/client/client.js) under plain Node: a stub
// React (createElement builds plain trees; hooks are no-ops), stub slots, configForms and
// locale. Prints one JSON line for tests/test_dsh_web_client.py to check.
import { readFileSync } from 'node:fs'

const file = process.argv[2]
const flag = process.argv[3] || ''
let loaded = null
globalThis.window = { __ModuleLoader__: { load: (m) => { loaded = m } } }
globalThis.localStorage = { getItem: (k) => (k === 'dsh-recall.test.throw' ? flag || null : null) }
// eslint-disable-next-line no-new-func
new Function(readFileSync(file, 'utf8'))()

class Component { constructor (props) { this.props = props } }
const React = {
  Component,
  createElement: (type, props, ...children) => ({ type, props: props || {}, children: children.flat() }),
  useEffect: () => {},
  useState: (v) => [v, () => {}],
  memo: (f) => f
}
// dsh's TextShimmer is a React.memo object in the runtime, not a plain function (D2): the
// stub is one too, and `text` below renders it as React would (through `.type`).
const TextShimmer = { $$typeof: Symbol.for('react.memo'), type: ({ active, children }) => ({ type: 'shimmer', props: { active }, children: [children].flat() }) }
const modules = { react: React, '@deepseek-ai/dsh-client-ui-primitives': { TextShimmer } }
const exports = loaded.factory((name) => {
  if (name in modules) return modules[name]
  throw new Error(`no module ${name}`)
})

const registered = []
let snapshot = { status: 'ready', value: { reaper: true, minChars: 256 }, base: {}, user: {}, revision: 1, writable: true }
const listeners = new Set()
const mutations = []
const scope = {
  getSnapshot: () => snapshot,
  subscribe: (fn) => { listeners.add(fn); return () => listeners.delete(fn) },
  set: async () => true,
  unset: async () => true,
  mutate: async (ops) => { mutations.push(ops); return false }
}
// The shared describe mirror: the namespace row says whether the secret holds a value.
const mirrorOf = (set) => ({
  getSnapshot: () => ({ status: 'ready', view: { writable: true, namespaces: [{ ns: 'recall-native', secrets: [{ path: ['embedderApiKey'], set }] }] } }),
  subscribe: () => () => {}
})
const ctx = {
  effect: (fn) => { try { fn() } catch (e) { throw e } },
  inject: () => { throw new Error('no such service in this stub') },
  locale: { register: () => () => {} },
  configForms: { get: () => scope, whileServed: (ns, fn) => fn(), describe: () => mirrorOf(true) },
  slots: {
    inject: (name, fn) => fn(),
    register: (opts, Component) => { registered.push({ ...opts, Component }); return () => {} }
  }
}
const failures = exports.apply(ctx)
const bySlot = Object.fromEntries(registered.map((r) => [r.name, r]))

// Render a registered component with fake hooks (a selector over a fixed state).
const render = (name, state, extra = {}) => {
  const r = bySlot[name]
  const props = { ...r.inject(), useRecallStats: (sel) => sel(state), ...extra }
  const tree = r.Component(props) // the Guard wrapper
  const inner = tree.children[0]
  return inner.type(inner.props)
}
const call = (type, props) => (typeof type === 'function' ? type(props) : type.type(props)) // memo: its inner function
const isComponent = (type) => typeof type === 'function' || (type !== null && typeof type === 'object' && typeof type.$$typeof === 'symbol')
const text = (node) => node == null || node === false ? '' : typeof node === 'string' || typeof node === 'number' ? String(node)
  : Array.isArray(node) ? node.map(text).join('')
  : isComponent(node.type) ? text(call(node.type, { ...node.props, children: node.children }))
  : (node.children || []).map(text).join('')

const session = { offloads: 3, charsIn: 120000, charsInline: 3000, keptChars: 117000 }
const base = { loaded: true, ok: true, health: 'ready', objects: { offloaded: 3, tokens_kept_out: 29250, recalls: 9, disk_bytes: 12000000 }, sessions: { s1: session }, recalling: false, complete: false }
const STRIP = 'sidebar.footer.action'
const strip = (state, extra = {}) => render(STRIP, state, { wide: true, ...extra })
const has = (node, pred) => JSON.stringify(node, (k, v) => (typeof v === 'symbol' ? String(v) : v)).includes(pred)
const out = {
  failures,
  slots: registered.map((r) => `${r.name}:${r.id ?? r.key}`),
  chip: text(render('conversation.session.header.utilities', base, { sessionId: 's1' })),
  chipOther: render('conversation.session.header.utilities', base, { sessionId: 'nobody' }),
  // The ledger's figures (the host half's one source, D11/D12): tokens, as the strip says.
  chipLedger: text(render('conversation.session.header.utilities', { ...base, sessions: { s1: { offloads: 1, reads_shortened: 0, reclaimed: 0, tokens_kept_out: 22556 } } }, { sessionId: 's1' })),
  strip: text(strip(base)),
  strip_one: text(strip({ ...base, objects: { offloaded: 1, tokens_kept_out: 1, recalls: 1, disk_bytes: 10 } })),
  stripBusy: (() => { const n = strip({ ...base, recalling: true }); return { text: text(n), shimmer: has(n, '"active":true') && has(n, 'Symbol(react.memo)') } })(),
  stripDone: text(strip({ ...base, complete: true })),
  stripDegraded: text(strip({ ...base, health: 'slow' })),
  stripDegradedTone: strip({ ...base, health: 'dead' }).props['data-health'] + ':' + (has(strip({ ...base, health: 'dead' }), '"data-tone":"error"')),
  stripRail: (() => { const n = strip(base, { wide: false }); return { text: text(n), title: n.props.title, wide: n.props['data-wide'] } })(),
  stripUnloaded: strip({ ...base, ok: false }),
  // The runtime's `t` for the active locale (here: Chinese words for every key).
  stripZh: text(strip(base, { t: (k, vars) => exports._test.zh[k] })),
  zhKeys: Object.keys(exports._test.en).filter((k) => !(k in exports._test.zh)),
  refusal: exports._test.readRefusal('$.callTimeoutMs expected number >= 50 but got 10'),
  refusalMax: exports._test.readRefusal('Config for recall-native: $.hangMs expected number <= 3600000 but got 9999999999'),
  refusalOther: exports._test.readRefusal('Configuration for "recall-native" is overridden by a home patch or command-line overlay'),
  renderable: [exports._test.renderable(TextShimmer), exports._test.renderable(() => null), exports._test.renderable({}), exports._test.renderable(null)],
  bool: [exports._test.booleanField('reaper').parse('false'), exports._test.booleanField('reaper').parse('maybe') ?? null]
}
// A save the runtime refuses: the card keeps the refusal to show (no remote here: the
// generic reason).
const card = exports._test.createCard(scope, () => null)
card.actions.edit?.('minChars', '300')
out.cardRefusal = card.store.getSnapshot().refusal
// The secret's badge: set in the runtime (the mirror's flag), and not set.
const find = (node, pred) => {
  if (node == null || typeof node !== 'object') return null
  if (pred(node)) return node
  if (typeof node.type === 'function') return find(node.type({ ...node.props, children: node.children }), pred)
  for (const c of node.children || []) { const f = find(c, pred); if (f) return f }
  return null
}
const cardText = (mirror) => {
  const c = exports._test.createCard(scope, () => null, mirror)
  const tree = bySlot['plugins.item'].Component({ ...c.actions, useRecallCard: (sel) => sel(c.store.getSnapshot()), view: 'page' })
  const inner = tree.children[0]
  const field = find(inner.type(inner.props), (n) => n.props?.['data-field'] === 'embedderApiKey')
  return { set: field?.props['data-secret-set'], text: text(field) }
}
// A figure and its unit in one unbreakable span ("107 KB" never splits across lines).
out.stripNowrap = ['12.0 MB on disk', '29,250 tokens kept out'].map((want) =>
  !!find(strip(base), (n) => n.props?.style?.whiteSpace === 'nowrap' && text(n) === want))
out.chipNowrap = render('conversation.session.header.utilities', base, { sessionId: 's1' }).props.style.whiteSpace
out.secretSet = cardText(mirrorOf(true))
out.secretUnset = cardText(mirrorOf(false))
out.secretRegistered = (() => {
  const c = bySlot['plugins.item'].inject().hooks.recallCard
  return c.getSnapshot().secretSet
})()

// The poller over a host half that says `recalling` for a while after a call starts: a
// call that ended between two polls still shows its sweep, then "Recall complete" once.
const answers = [
  { busy: 0, recalling: false, lastDoneAt: 0 },
  { busy: 1, recalling: true, lastDoneAt: 0 },
  { busy: 0, recalling: false, lastDoneAt: 100 },
  { busy: 0, recalling: false, lastDoneAt: 100 },
  { busy: 0, recalling: false, lastDoneAt: 200 } // a recall that ran between two answers
].map((a) => ({ version: 1, health: 'ready', objects: {}, sessions: {}, ...a }))
let queued = null
const realSetTimeout = globalThis.setTimeout
globalThis.setTimeout = (fn) => { queued = fn; return 1 }
globalThis.clearTimeout = () => { queued = null }
let served = 0
const urls = []
let clock = 1000
const stats = exports._test.createStats(async (url) => { urls.push(url); return { ok: true, json: async () => answers[served++] } }, () => clock)
const flush = () => new Promise((resolve) => setImmediate(resolve))
const seen = []
stats.acquire()
for (let i = 0; i < answers.length; i++) {
  await flush()
  const st = stats.store.getSnapshot()
  seen.push(st.recalling ? 'sweep' : st.complete ? 'complete' : 'idle')
  clock += 5000 // past "Recall complete"'s few seconds
  if (i < answers.length - 1) { const fn = queued; queued = null; fn() }
}
globalThis.setTimeout = realSetTimeout
out.sweep = seen
out.urls = urls
console.log(JSON.stringify(out))
