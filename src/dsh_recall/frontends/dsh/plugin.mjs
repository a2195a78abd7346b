// dsh-recall native plugin for DeepSeek Harness (dsh). Plain ESM: no dependencies, no build.
//
// Mounted by a cordis patch (`dsh-recall integrate dsh patch` writes it):
//   - insert: [{id: recall-native, name: /abs/path/plugin.mjs, config: {command, env, ...}}]
//
// What it does, all decided by one long-lived `dsh-recall worker` (JSON lines over stdio):
//   tools/post-execute      big text results -> head + pointer + tail (the reaper); a big
//                           whole-file read -> head + outline + how to read a range
//   agent/pre-step          before dsh's step: results already seen -> compaction/prune +
//                           tool/result replace; after it (and after any compaction): the
//                           compaction anchor, history recall and notes for the new user
//                           turn, once, as a user message (the system prompt never changes)
//   session/event           remembers the user's message, compactions; imports each turn
//
// In the web profile it also has a browser half (client/client.js, declared by the package.json
// beside this file): a settings card over the volatile fields of `Config` below (a save
// reaches this process live, no remount), a header chip, a Recall tab and a strip, fed by
// GET /api/dsh-recall/stats (counts only), registered only where the runtime serves HTTP.
//
// It never blocks or breaks dsh: the worker starts when dsh loads the plugin; every call
// has a deadline; while a call is overdue the next ones pass through at once; when the worker
// dies, calls pass through until the next request restarts it (once per dsh process); a
// second death leaves dsh as it would be without this plugin. Each kind of trouble is
// logged once.

import { spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { mkdirSync, renameSync, writeFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'

export const name = 'dsh-recall-native'

// The runtime's schema library (Schemastery), for a Config the settings service can read. A
// file outside the runtime cannot import the bare name (its resolver only looks inside the
// binary), so the binary's own path is the fallback; without either (plain Node, a test)
// there is no Config and the config arrives as the plain object it is.
async function schemastery () {
  for (const spec of ['@deepseek-ai/schemastery', '/snapshot/node/node_modules/@deepseek-ai/schemastery/lib/index.mjs']) {
    try {
      const m = await import(spec)
      const z = m.default ?? m
      if (typeof z?.object === 'function' && typeof z.boolean === 'function') return z
    } catch {}
  }
  return null
}

const DEFAULTS = Object.freeze({
  command: 'dsh-recall',
  args: ['worker'],
  env: {},
  // The MCP server mounted next to this plugin: its answers are recall, never offloaded.
  serverName: 'recall',
  // Tools whose output the model needs verbatim (edits match exact text): left alone by the
  // reaper; the worker reclaims them later only under objects.budget_tokens.
  passThrough: ['read', 'write', 'edit', 'todo_write', 'read_image', 'skill'],
  reaper: true,
  // Whole-file reads over the worker's reads.outline_over_chars become head + outline
  // (policy/reads.py); false leaves every read as dsh shows it.
  reads: true,
  autoRecall: true,
  reclaim: true,
  // Deadlines: a request never waits longer than this for the worker's answer (first request
  // included: the worker starts when dsh loads the plugin, long before the first request).
  callTimeoutMs: 1500,
  // How long after its start a worker may take to print its ready line; calls made later
  // than that while it is still silent pass through at once (and say so once).
  startTimeoutMs: 1500,
  // A call overdue this long means a wedged worker: it is killed (and restarted once).
  hangMs: 60000,
  // Results shorter than this never go to the worker (objects.threshold_chars decides above).
  minChars: 256,
})
// What the settings card may change while dsh runs (the runtime keeps each as a live
// reference); the command, its arguments and environment only apply to a new worker.
const VOLATILE = ['reaper', 'reads', 'autoRecall', 'reclaim', 'minChars', 'callTimeoutMs', 'startTimeoutMs', 'hangMs']
// Write-only from a card (role 'secret': no settings response carries it); given to the
// worker as RECALL_EMBEDDER_API_KEY (its embedder.api_key_env, unless env names another).
const SECRET_FIELD = 'embedderApiKey'
const KNOWN = new Set([...Object.keys(DEFAULTS), SECRET_FIELD])
// [min, max] of the numeric fields. Node fires a timer over 2^31-1 ms after 1 ms, so an
// unbounded deadline made every call time out; a value outside is refused by the schema (a
// save in the card) and, from a hand-written patch, replaced by the default with a warning.
const RANGES = Object.freeze({
  minChars: [0, 10_000_000],
  callTimeoutMs: [50, 60_000],
  startTimeoutMs: [50, 120_000],
  hangMs: [1000, 3_600_000]
})
const inRange = (k, v) => !RANGES[k] || (Number.isFinite(v) && v >= RANGES[k][0] && v <= RANGES[k][1])

function buildConfig (z) {
  const count = (k) => z.natural().min(RANGES[k][0]).max(RANGES[k][1]).default(DEFAULTS[k]).volatile()
  return z.object({
    command: z.string().default(DEFAULTS.command).description('How to run dsh-recall'),
    args: z.array(z.string()).default([...DEFAULTS.args]),
    env: z.dict(z.string()).default({}),
    serverName: z.string().default(DEFAULTS.serverName),
    passThrough: z.array(z.string()).default([...DEFAULTS.passThrough]),
    reaper: z.boolean().default(DEFAULTS.reaper).volatile(),
    reads: z.boolean().default(DEFAULTS.reads).volatile(),
    autoRecall: z.boolean().default(DEFAULTS.autoRecall).volatile(),
    reclaim: z.boolean().default(DEFAULTS.reclaim).volatile(),
    minChars: count('minChars'),
    callTimeoutMs: count('callTimeoutMs'),
    startTimeoutMs: count('startTimeoutMs'),
    hangMs: count('hangMs'),
    [SECRET_FIELD]: z.string().role('secret').volatile()
  })
}

let built
try {
  const z = await schemastery()
  built = z ? buildConfig(z) : undefined
} catch {
  built = undefined // a runtime whose schema library differs: plain config, as before
}
export const Config = built

// A volatile field arrives as a live reference (`.get()`); a plain value otherwise.
const live = (v) => (v !== null && typeof v === 'object' && typeof v.get === 'function') ? v.get() : v
// Variables never handed to the worker (dsh's MCP client drops the same kind).
const SECRET = /(API[_-]?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE[_-]?KEY|AUTH)/i
const MAX_STARTS = 2
// A stats answer older than this is fetched again from the worker before a poll is answered.
const FRESH_MS = 250
// How long the stats route holds a browser's long poll when the auto-recall it saw has not
// changed (its poll period).
const WAIT_MS = 1500
// The kind of the user messages this plugin adds (history import skips it).
const SOURCE_KIND = 'dsh-recall'

function settings (config) {
  const c = { ...DEFAULTS }
  const unknown = []
  const raw = config ?? {}
  for (const [k, v] of Object.entries(raw)) {
    if (!KNOWN.has(k)) unknown.push(k)
    else if (k !== SECRET_FIELD && !VOLATILE.includes(k) && v !== undefined && v !== null) c[k] = v
  }
  if (!Array.isArray(c.args)) c.args = [...DEFAULTS.args]
  if (typeof c.env !== 'object' || c.env === null || Array.isArray(c.env)) c.env = {}
  c.passThrough = new Set(Array.isArray(c.passThrough) ? c.passThrough : DEFAULTS.passThrough)
  // Read at each use: a save on the settings card changes them in this process.
  for (const k of VOLATILE) {
    Object.defineProperty(c, k, {
      enumerable: true,
      get: () => {
        let v
        try { v = live(raw[k]) } catch {}
        return (v === undefined || v === null || typeof v !== typeof DEFAULTS[k] || !inRange(k, v)) ? DEFAULTS[k] : v
      }
    })
  }
  const bad = []
  for (const k of Object.keys(RANGES)) {
    let v
    try { v = live(raw[k]) } catch {}
    if (v !== undefined && v !== null && (typeof v !== 'number' || !inRange(k, v))) {
      bad.push(`${k} ${JSON.stringify(v)} (allowed ${RANGES[k][0]}-${RANGES[k][1]}; using ${DEFAULTS[k]})`)
    }
  }
  let secret
  try { secret = live(raw[SECRET_FIELD]) } catch {}
  if (typeof secret === 'string' && secret) {
    c.env = { DSH_RECALL_EMBEDDER__API_KEY_ENV: 'RECALL_EMBEDDER_API_KEY', ...c.env, RECALL_EMBEDDER_API_KEY: secret }
  }
  return { c, unknown, bad }
}

function workerEnv (extra) {
  const env = {}
  for (const [k, v] of Object.entries(process.env)) {
    if (typeof v === 'string' && (k.startsWith('DSH_RECALL_') || !SECRET.test(k))) env[k] = v
  }
  for (const [k, v] of Object.entries(extra)) env[k] = String(v)
  return env
}

class Worker {
  constructor (c, warn, health) {
    this.c = c
    this.warn = warn
    this.health = health
    this.startedAt = 0
    this.floors = {}
    this.proc = null
    this.state = 'new' // new | running | dead | disabled
    this.starts = 0
    this.ready = false
    this.nextId = 1
    this.pending = new Map()
    this.buffer = ''
    this.stderr = ''
  }

  start () {
    if (this.starts >= MAX_STARTS) {
      this.state = 'disabled'
      return
    }
    this.starts += 1
    this.ready = false
    this.buffer = ''
    this.startedAt = Date.now()
    let proc
    try {
      proc = spawn(this.c.command, this.c.args.map(String), {
        stdio: ['pipe', 'pipe', 'pipe'], env: workerEnv(this.c.env), windowsHide: true
      })
    } catch (e) {
      this.died(null, `could not start (${e && e.message})`)
      return
    }
    this.proc = proc
    this.state = 'running'
    proc.stdout.setEncoding('utf8')
    proc.stdout.on('data', (chunk) => this.data(proc, chunk))
    proc.stderr.setEncoding('utf8')
    proc.stderr.on('data', (d) => { this.stderr = (this.stderr + d).slice(-1500) })
    proc.stdin.on('error', () => {}) // EPIPE after a death: `exit` reports it
    proc.on('error', (e) => this.died(proc, `could not run ${this.c.command} (${e && e.message})`))
    proc.on('exit', (code, signal) => this.died(proc, `exited (${signal ?? `code ${code}`})`))
    // The worker must never keep dsh alive: it exits by itself when its stdin closes (and,
    // should dsh die without closing it, when it sees its parent gone). A worker still there
    // when dsh exits is stopped then.
    const onExit = () => { try { proc.kill('SIGTERM') } catch {} }
    process.once('exit', onExit)
    proc.once('exit', () => process.removeListener('exit', onExit))
    proc.unref()
    for (const s of [proc.stdin, proc.stdout, proc.stderr]) s?.unref?.()
  }

  died (proc, reason) {
    if (proc !== null && proc !== this.proc) return
    if (this.state === 'dead' || this.state === 'disabled') return
    this.proc = null
    this.ready = false
    this.state = this.starts >= MAX_STARTS ? 'disabled' : 'dead'
    for (const p of this.pending.values()) p.finish(null)
    this.pending.clear()
    const tail = this.stderr.trim().split('\n').slice(-3).join(' | ')
    this.health(this.state, `${reason}${tail ? ` (stderr: ${tail})` : ''}`)
    this.warn(`died-${this.starts}`, `dsh-recall worker ${reason}; ` +
      (this.state === 'dead' ? 'tool results pass through until the next request restarts it'
        : 'giving up for this dsh process: dsh runs as it would without dsh-recall') +
      (tail ? ` (stderr: ${tail})` : ''))
  }

  data (proc, chunk) {
    if (proc !== this.proc) return
    this.buffer += chunk
    let nl
    while ((nl = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, nl)
      this.buffer = this.buffer.slice(nl + 1)
      let msg
      try { msg = JSON.parse(line) } catch { continue }
      if (msg && msg.id === 0) {
        this.ready = true
        this.floors = floorsOf(msg.result) // the user's; a session's own come with its context
        this.health('ready', null)
        continue
      }
      const p = msg && this.pending.get(msg.id)
      if (!p) continue
      this.pending.delete(msg.id)
      if (p.late) this.health('ready', null)
      if (!msg.ok) this.warn(`error-${p.op}`, `dsh-recall worker: ${p.op} failed: ${msg.error}`)
      p.finish(msg.ok ? msg.result : null)
    }
  }

  notReady () {
    const ms = Date.now() - this.startedAt
    this.health('starting', `no ready line ${ms} ms after start`)
    this.warn(`start-${this.starts}`, `dsh-recall worker printed no ready line within ${ms} ms ` +
      'of its start; tool results pass through and no recall is added until it does' +
      (this.stderr.trim() ? ` (stderr: ${this.stderr.trim().split('\n').slice(-2).join(' | ')})` : ''))
  }

  // Restart after a death, at most once per process; called at request boundaries only.
  revive () {
    if (this.state === 'dead') this.start()
  }

  overdue () {
    const now = Date.now()
    for (const p of this.pending.values()) {
      if (p.late) {
        if (now - p.deadline > this.c.hangMs && this.proc) {
          this.health('hung', `no answer to ${p.op} for ${Math.round((now - p.deadline) / 1000)} s`)
          this.warn('hang', 'dsh-recall worker did not answer for a minute; stopping it')
          try { this.proc.kill('SIGKILL') } catch {}
        }
        return true
      }
    }
    return false
  }

  // Resolves with the result, or null on any failure (never rejects, never waits past
  // the deadline).
  // `background`: a call nobody waits on (the stats route's refresh); its deadline passing
  // says nothing about the worker and slows no later call.
  call (op, payload, timeoutMs = this.c.callTimeoutMs, background = false) {
    return new Promise((resolve) => {
      if (this.state === 'new') this.start()
      if (this.state !== 'running' || this.proc === null || this.overdue()) return resolve(null)
      const sinceStart = Date.now() - this.startedAt
      if (!this.ready && sinceStart >= this.c.startTimeoutMs) {
        // Silent since its start: pass through at once rather than make every call wait.
        this.notReady()
        return resolve(null)
      }
      const id = this.nextId++
      // Not ready yet: the start deadline bounds the wait as well.
      const wait = this.ready ? timeoutMs : Math.min(timeoutMs, this.c.startTimeoutMs - sinceStart)
      let done = false
      const p = {
        op,
        late: false,
        deadline: Date.now() + wait,
        finish: (value) => {
          clearTimeout(p.timer)
          if (!done) { done = true; resolve(value) }
        }
      }
      p.timer = setTimeout(() => {
        if (background) {
          if (!done) { done = true; resolve(null) }
          return
        }
        p.late = true // stays pending: later calls pass through until it answers
        if (!this.ready) {
          this.notReady()
        } else {
          this.health('slow', `${op} took over ${wait} ms`, op)
          this.warn(`slow-${op}`, `dsh-recall worker: ${op} took over ${wait} ms; passing through`)
        }
        if (!done) { done = true; resolve(null) }
      }, wait)
      p.timer.unref?.()
      this.pending.set(id, p)
      try {
        // deadline_at: the worker does not count an answer it finished after it (dsh went on
        // with its own result: nothing was kept out).
        this.proc.stdin.write(JSON.stringify({ ...payload, id, op, deadline_at: p.deadline }) + '\n')
      } catch {
        this.pending.delete(id)
        p.finish(null)
      }
    })
  }

  // A line nobody waits on (the ledger's `request`): no deadline, no pending entry; its
  // answer is ignored. False when there is no running worker to take it.
  notify (op, payload) {
    if (this.state !== 'running' || this.proc === null) return false
    try {
      this.proc.stdin.write(JSON.stringify({ ...payload, id: this.nextId++, op }) + '\n')
      return true
    } catch { return false }
  }

  // The user's restart (the card's button): the running worker stops, and a new one starts
  // with a fresh start budget.
  restart (reason) {
    this.stop()
    this.starts = 0
    this.state = 'new'
    this.health('starting', reason)
    this.start()
  }

  stop () {
    const proc = this.proc
    this.state = 'disabled'
    this.proc = null
    for (const p of this.pending.values()) p.finish(null)
    this.pending.clear()
    if (proc) {
      try { proc.stdin.end() } catch {}
      // A healthy worker exits when its stdin closes; a hung one is stopped here. The timer
      // is unref'd, so dsh's own exit also reaches the 'exit' hook below (kill at once).
      setTimeout(() => { try { proc.kill('SIGKILL') } catch {} }, 500).unref?.()
    }
  }
}

// Sizes under which the worker would change nothing (worker.py: floors): such results are
// never sent.
function floorsOf (answer) {
  const out = {}
  for (const k of ['threshold_chars', 'read_chars']) {
    if (Number.isInteger(answer?.[k]) && answer[k] >= 0) out[k] = answer[k]
  }
  return out
}

function textOf (message) {
  const blocks = Array.isArray(message?.content) ? message.content : []
  return blocks.filter((b) => b && b.type === 'text' && typeof b.text === 'string')
    .map((b) => b.text).join('\n')
}

// The recall home the worker will use (core/paths.py: recall_home), from its environment.
function recallHome (env) {
  if (env.DSH_RECALL_HOME) return env.DSH_RECALL_HOME.replace(/^~(?=$|\/)/, homedir())
  if (env.DSH_HOME) return join(env.DSH_HOME.replace(/^~(?=$|\/)/, homedir()), 'dsh-recall')
  return join(homedir(), '.dsh', 'dsh-recall')
}

// What this plugin knows of its worker, for `dsh-recall status` / MCP `status` (worker.py
// reads it): one small file, replaced whole, only when the state changes.
function healthWriter (c) {
  let path = null
  try { path = join(recallHome(workerEnv(c.env)), 'dsh', 'plugin-status.json') } catch {}
  let last = ''
  const warnings = []
  // Calls dsh went on without (past their deadline), per op, for this dsh process.
  const late = {}
  return {
    warnings,
    late,
    write (state, reason) {
      if (!path) return
      const lateN = Object.values(late).reduce((a, b) => a + b, 0)
      const key = `${state}\0${reason ?? ''}\0${warnings.length}\0${lateN}`
      if (key === last) return
      last = key
      const record = { dsh_pid: process.pid, state, reason: reason ?? null, at: Date.now() / 1000,
        warnings: warnings.slice(-5), late: { ...late } }
      try {
        mkdirSync(join(path, '..'), { recursive: true, mode: 0o700 })
        const tmp = `${path}.${process.pid}.tmp`
        writeFileSync(tmp, JSON.stringify(record), { mode: 0o600 })
        renameSync(tmp, path)
      } catch {}
    }
  }
}

export function apply (ctx, config) {
  const { c, unknown, bad } = settings(config)
  const logger = ctx.logger ?? console
  const warned = new Set()
  const status = healthWriter(c)
  let health = { state: 'new', reason: null }
  const setHealth = (state, reason, lateOp) => {
    if (lateOp) status.late[lateOp] = (status.late[lateOp] ?? 0) + 1
    health = { state, reason }
    status.write(state, reason)
  }
  const warn = (key, message) => {
    if (warned.has(key)) return
    warned.add(key)
    status.warnings.push({ at: Date.now() / 1000, message: message.slice(0, 500) })
    status.write(health.state, health.reason)
    // dsh 0.2.1rc2 keeps no log file and drops warn-level lines of its logger: stderr (once
    // per kind of trouble) is where a dsh user sees it, as dsh's own plugin-start errors.
    try { logger.warn(message) } catch {}
    try { process.stderr.write(`${message}\n`) } catch {}
  }
  if (unknown.length) warn('config', `dsh-recall plugin: unknown config keys ignored: ${unknown.join(', ')}`)
  if (bad.length) warn('config-range', `dsh-recall plugin: config values out of range: ${bad.join('; ')}`)
  const worker = new Worker(c, warn, setHealth)
  // Start now: by the first request the worker has long printed its ready line.
  if (c.reaper || c.autoRecall) worker.start()
  const sessions = new Map() // session id -> what this plugin remembers about it
  const state = (id) => {
    let s = sessions.get(id)
    if (!s) {
      s = { message: null, askedFor: null, compacted: false, delivered: new Set(), tools: new Map(),
        reclaim: null, floors: {}, changed: new Set(), added: [], requests: [], shortened: new Set(),
        objects: new Set(), readBack: false, window: null }
      sessions.set(id, s)
    }
    return s
  }
  // What the browser half shows (counts only): per session, as this process saw it, and
  // whether an auto-recall call runs now (its "Recalling…" sweep: that call only, from its
  // start to its end; offloads, reads and reclaims are not recalls).
  const activity = { busy: 0, recalling: 0, lastDoneAt: 0, lastCwd: null }
  const waiters = new Set() // the browsers' long polls, answered when the recall state changes
  const wake = () => { for (const w of [...waiters]) w() }
  // The figures (tokens kept out per request and session) live in one place, the worker's
  // ledger (services/report/ledger.py). This process only remembers the keys of the changes
  // it made to what each session's model reads (tool call ids, recall message ids), to tell
  // the ledger at each model request which of them that request still carried.
  const note = (session, key) => {
    if (typeof session?.id === 'string' && session.id && key) state(session.id).changed.add(String(key))
    totals.at = 0 // the next poll asks the worker again: it shows this change (D12)
  }
  const carried = (session, s) => {
    const nodes = session?.surface?.nodes
    if (!nodes || typeof nodes[Symbol.iterator] !== 'function' || typeof session.eventAt !== 'function') return null
    const out = []
    for (const seq of nodes) {
      const ev = session.eventAt(seq)
      let key = null
      if (ev?.type === 'tool/result') {
        const m = ev.data?.message
        key = String(m?.toolCallId ?? m?.source?.callId ?? `seq-${seq}`)
      } else if (ev?.type === 'user/message' && ev.data?.source?.kind === SOURCE_KIND) {
        key = `msg-${ev.data?.id}`
      }
      if (key !== null && s.changed.has(key)) out.push(key)
    }
    return out
  }
  // A call that reads back what this plugin kept out (a recall of one of its objects by id,
  // a read or grep of a file it shortened): the request it leads to is one plain dsh would
  // not have made, a cost in the ledger.
  const pathOf = (session, p) => {
    const cwd = session?.header?.cwd
    const s = String(p).replace(/^\.\//, '')
    return typeof cwd === 'string' && s.startsWith(`${cwd}/`) ? s.slice(cwd.length + 1) : s
  }
  const readBack = (exec) => {
    const session = exec.agent?.session
    const s = session?.id && exec.parent === undefined ? sessions.get(session.id) : undefined
    if (!s) return
    const a = exec.arguments ?? {}
    // read and grep only: an edit or a write of the file is no read-back
    const reads = exec.name === 'read' || exec.name === 'grep'
    const path = !reads ? null : typeof a.file_path === 'string' ? a.file_path : typeof a.path === 'string' ? a.path : null
    const id = typeof a.id === 'string' && String(exec.name).startsWith(mcpPrefix) ? a.id.split('#')[0] : null
    if ((path !== null && s.shortened.has(pathOf(session, path))) || (id !== null && s.objects.has(id))) s.readBack = true
  }
  // One model request (dsh logs an `assistant/message` per request, with the provider's
  // usage): queued, then sent in order behind every worker call it follows.
  const requested = (session, event) => {
    const s = state(session.id)
    const tin = event.data?.usage?.inputTokens
    s.requests.push({ session: session.id, cwd: session.header?.cwd ?? null, present: carried(session, s),
      added: s.added.splice(0), input_tokens: Number.isInteger(tin) && tin >= 0 ? tin : null, readback: s.readBack,
      context_window: s.window })
    s.readBack = false
    totals.at = 0
    while (s.requests.length && worker.notify('request', s.requests[0])) s.requests.shift()
    if (s.requests.length > 1000) s.requests.splice(0, s.requests.length - 1000)
  }
  const ask = (op, payload) => {
    // A worker that is not running answers nothing: no sweep, no "Recall complete" (D9).
    if (worker.state !== 'running' && worker.state !== 'new') return worker.call(op, payload)
    const recalling = op === 'context'
    activity.busy += 1
    if (recalling) { activity.recalling += 1; wake() }
    if (typeof payload?.cwd === 'string') activity.lastCwd = payload.cwd
    return worker.call(op, payload).finally(() => {
      activity.busy -= 1
      if (recalling) {
        activity.recalling -= 1
        activity.lastDoneAt = Date.now()
        wake()
      }
    })
  }
  const mcpPrefix = `mcp__${c.serverName}__`
  const passes = (tool) => c.passThrough.has(tool) || String(tool).startsWith(mcpPrefix)
  const service = (key) => { try { return ctx.get?.(key) } catch { return undefined } }
  const flush = async (session) => {
    try { await service('sessions')?.flush?.(session) } catch {}
  }

  // -- the reaper -----------------------------------------------------------------------
  ctx.on('tools/post-execute', async (exec, result, next) => {
    const decision = await next()
    try { readBack(exec) } catch {}
    try {
      if (c.reaper && c.reads && exec.parent === undefined && exec.name === 'read') {
        return await shortRead(exec, result, decision)
      }
      if (!c.reaper || exec.parent !== undefined || passes(exec.name)) return decision
      if (decision?.kind !== 'accept' || Object.hasOwn(decision, 'value')) return decision
      const content = decision.content ?? result?.content
      if (!Array.isArray(content)) return decision
      const texts = content.map((b) => (b?.type === 'text' && typeof b.text === 'string') ? b.text : null)
      // Under the offload threshold nothing can change: no round trip (the worker's own
      // threshold for this workspace once a request told it, else the user's default).
      const floor = Math.max(c.minChars, floorOf(exec, 'threshold_chars') ?? 0)
      if (!texts.some((t) => t !== null && t.length > floor)) return decision
      const session = exec.agent?.session
      const answer = await ask('offload', {
        session: session?.id ?? null,
        cwd: session?.header?.cwd ?? null,
        call_id: exec.callId ?? null,
        tool: exec.name ?? null,
        blocks: texts
      })
      const blocks = answer?.blocks
      if (!Array.isArray(blocks) || !blocks.some((b) => typeof b === 'string')) return decision
      const replaced = content.map((b, i) => typeof blocks[i] === 'string' ? { ...b, text: blocks[i] } : b)
      const changed = blocks.map((b, i) => typeof b === 'string' && texts[i] !== null ? i : -1).filter((i) => i >= 0)
      if (changed.some((i) => answer.ids?.[i])) note(session, exec.callId ?? `offload-${answer.ids.find(Boolean)}`)
      for (const id of answer.ids ?? []) if (typeof id === 'string' && session?.id) state(session.id).objects.add(id)
      return { ...decision, kind: 'accept', content: replaced }
    } catch (e) {
      warn('reaper', `dsh-recall plugin: reaper skipped (${e && e.message})`)
      return decision
    }
  })

  // The size under which the worker would change nothing, for this call's session (its
  // workspace's config, once a request told it), else the user's; undefined before either.
  const floorOf = (exec, key) => {
    const s = exec.agent?.session?.id ? sessions.get(exec.agent.session.id) : undefined
    return s?.floors?.[key] ?? worker.floors[key]
  }

  // A whole-file read (no offset / limit) over the threshold -> head + outline + how to read
  // a range. A ranged read passes whole: the exact text of an edit is always one call away.
  async function shortRead (exec, result, decision) {
    if (decision?.kind !== 'accept' || Object.hasOwn(decision, 'value')) return decision
    const args = exec.arguments ?? {}
    if (args.offset !== undefined || args.limit !== undefined) return decision
    const content = decision.content ?? result?.content
    if (!Array.isArray(content) || content.length !== 1 || content[0]?.type !== 'text') return decision
    const text = content[0].text
    const floor = floorOf(exec, 'read_chars')
    if (typeof text !== 'string' || floor === 0 || text.length <= Math.max(c.minChars, floor ?? 0)) return decision
    const session = exec.agent?.session
    const answer = await ask('read', {
      session: session?.id ?? null, cwd: session?.header?.cwd ?? null, call_id: exec.callId ?? null,
      path: typeof args.file_path === 'string' ? args.file_path : null, text
    })
    if (typeof answer?.text !== 'string') return decision
    note(session, exec.callId)
    if (session?.id && typeof args.file_path === 'string') state(session.id).shortened.add(pathOf(session, args.file_path))
    return { ...decision, kind: 'accept', content: [{ ...content[0], text: answer.text }] }
  }

  // -- auto-recall, notes, anchor: a message with the newest user turn, never the prompt ----
  // What is recalled goes into the conversation once, as a user message of its own kind
  // right after the turn's user message (or after a compaction's checkpoint), through the
  // `agent/pre-step` waterfall after dsh's own listeners (its compaction among them). The
  // system prompt and every earlier byte of the request stay as they were, so the provider's
  // prefix cache holds; on dsh's in-history route a changed prompt would add a copy of the
  // whole prompt to history each time.
  ctx.on('agent/pre-step', async (payload, next) => {
    // A request boundary: a worker that died is restarted (once per dsh process) whatever
    // is switched on; auto-recall off must not leave the reaper and reads without it (D10).
    if (c.reaper || c.reads || c.autoRecall || c.reclaim) worker.revive()
    try {
      const session = payload?.agent?.session
      const s = session?.id ? sessions.get(session.id) : undefined
      if (c.reclaim && s?.reclaim && worker.state === 'running') await reclaim(session, s)
    } catch (e) {
      warn('reclaim', `dsh-recall plugin: reclaim skipped (${e && e.message})`)
    }
    const decision = await next()
    try {
      return await recall(payload, decision)
    } catch (e) {
      warn('recall', `dsh-recall plugin: no recall message (${e && e.message})`)
      return decision
    }
  })

  async function recall (payload, decision) {
    if (!c.autoRecall || decision?.kind === 'reject' || payload?.signal?.aborted) return decision
    if (!Array.isArray(decision?.messages)) return decision
    // dsh's own guard: an added message on an empty first step would make it run a model
    // call it would otherwise skip.
    if (decision.messages.length === 0 && (payload.step === 1 || (payload.messages?.length ?? 0) > 0)) return decision
    const session = payload.agent?.session
    if (!session?.id || payload.agent?.parent) return decision // the root agent only
    const s = state(session.id)
    const typed = (payload.messages ?? []).filter((m) => m?.role === 'user' &&
      (m.source?.kind === undefined || m.source?.kind === 'user'))
    if (typed.length) {
      const m = typed[typed.length - 1]
      s.message = { id: m.id ?? `turn-${payload.turn}`, text: textOf(m).slice(0, 4000) }
    }
    const message = await recallMessage(session, s)
    return message ? { ...decision, messages: [...decision.messages, message] } : decision
  }

  // After a compaction that no pre-step follows (dsh compacts on a context-length error and
  // retries the request at once): the anchor goes in before that retried request is built,
  // appended to the conversation as dsh appends a step's messages.
  ctx.on('agent/request', async (payload, next) => {
    const config = await next()
    try {
      const session = payload?.agent?.session
      const s = session?.id ? sessions.get(session.id) : undefined
      if (c.autoRecall && s?.compacted && !payload.agent?.parent && typeof session.append === 'function') {
        const message = await recallMessage(session, s)
        if (message) session.append('user/message', message, { surfaceOp: 'append' })
      }
    } catch (e) {
      warn('anchor', `dsh-recall plugin: no anchor after the compaction (${e && e.message})`)
    }
    return config
  })

  // The user message to add for this turn (or after a compaction), or null: each block the
  // worker recalls goes into the conversation once.
  async function recallMessage (session, s) {
    const fresh = s.message && s.message.id !== s.askedFor
    if (!fresh && !s.compacted) return null
    worker.revive()
    await flush(session)
    const compacted = s.compacted
    const answer = await ask('context', {
      session: session.id,
      cwd: session.header?.cwd ?? null,
      message_id: s.message?.id ?? null,
      message: s.message?.text ?? '',
      compacted
    })
    if (answer === null) return null
    s.askedFor = s.message?.id ?? null
    if (compacted) {
      s.compacted = false
      s.delivered.clear() // what was delivered before may be summarized away
    }
    s.reclaim = answer.reclaim ?? null
    s.floors = floorsOf(answer.floors)
    const parts = answer.blocks && typeof answer.blocks === 'object' ? answer.blocks : {}
    const fresher = Object.values(parts).filter((t) => typeof t === 'string' && t && !s.delivered.has(t))
    if (!fresher.length) return null
    for (const t of fresher) s.delivered.add(t)
    const text = [answer.header ?? '', ...fresher].filter(Boolean).join('\n\n')
    const id = randomUUID()
    // A cost in the ledger: plain dsh would not have sent it (its size as a JSON string).
    s.added.push([`msg-${id}`, JSON.stringify(text).length])
    s.changed.add(`msg-${id}`)
    return { id, role: 'user', content: [{ type: 'text', text }], source: { kind: SOURCE_KIND } }
  }

  function toolName (session, s, callId) {
    if (!s.tools.has(callId)) {
      for (const ev of session.snapshotEvents?.() ?? []) {
        if (ev.type === 'tool/call' && ev.data?.callId) s.tools.set(ev.data.callId, ev.data.name)
      }
      if (!s.tools.has(callId)) s.tools.set(callId, null) // scan once, not at every step
    }
    return s.tools.get(callId) ?? null
  }

  async function reclaim (session, s) {
    const { threshold_chars: threshold, budget, budget_tokens: budgetTokens } = s.reclaim
    const meter = service('tokenMeter')
    let tokens = null
    try { tokens = meter?.measure?.(session)?.totalTokens ?? null } catch {}
    // Under the budget nothing is chosen: do not even send the texts.
    if (budget && typeof tokens === 'number' && typeof budgetTokens === 'number' && tokens <= budgetTokens) return
    const results = []
    const surface = [] // [seq, chars] of every message: what a rewrite makes uncached
    for (const seq of session.surface?.nodes ?? []) {
      const ev = session.eventAt(seq)
      surface.push([seq, textOf(ev?.data?.message).length])
      if (ev?.type !== 'tool/result') continue
      const message = ev.data?.message
      const text = textOf(message)
      const callId = message?.toolCallId ?? message?.source?.callId
      const tool = callId ? toolName(session, s, callId) : null
      const through = tool === null || passes(tool)
      // Our own recall answers are what the model asked for: never taken back.
      const ours = tool !== null && String(tool).startsWith(mcpPrefix)
      results.push({ seq, tool, text: !ours && text.length > threshold && (budget || !through) ? text : null, pass_through: through, call_id: callId ?? null })
    }
    if (!results.some((r) => r.text !== null)) return
    const answer = await ask('reclaim', {
      session: session.id, cwd: session.header?.cwd ?? null, results, context_tokens: tokens, surface
    })
    for (const [key, rep] of Object.entries(answer?.replace ?? {})) {
      const seq = Number(key)
      const ev = session.eventAt(seq)
      if (ev?.type !== 'tool/result' || typeof rep?.text !== 'string') continue
      const original = ev.data.message
      const content = []
      let placed = false
      for (const b of original.content ?? []) {
        if (b?.type !== 'text') content.push(b)
        else if (!placed) { content.push({ type: 'text', text: rep.text }); placed = true }
      }
      note(session, original.toolCallId ?? original.source?.callId ?? `seq-${seq}`)
      let priced = Math.ceil(textOf(original).length / 4)
      try { priced = meter?.estimateMessage?.(original) ?? priced } catch {}
      session.append('compaction/prune', {
        shadowedRange: { start: seq, end: seq }, shadowedSeqs: [seq], shadowedTokenCount: priced
      })
      session.append('tool/result', { ...ev.data, message: { ...original, content } }, {
        surfaceOp: { op: 'replace', startSeq: seq, endSeq: seq }, sourceEventSeqs: [seq]
      })
    }
  }

  // -- what happened in the session ---------------------------------------------------
  ctx.on('session/event', (session, event) => {
    try {
      if (!session?.id || !event) return
      if (event.type === 'agent/inbox/spliced') {
        for (const m of event.data?.inserted ?? []) {
          const kind = m?.source?.kind
          if (m?.role === 'user' && (kind === undefined || kind === 'user')) {
            state(session.id).message = { id: m.id ?? `seq-${event.seq}`, text: textOf(m).slice(0, 4000) }
          }
        }
      } else if (event.type === 'tool/call' && event.data?.callId) {
        state(session.id).tools.set(event.data.callId, event.data.name)
      } else if (event.type === 'assistant/message') {
        requested(session, event)
      } else if (event.type === 'request/context' && Number.isInteger(event.data?.contextWindow)) {
        state(session.id).window = event.data.contextWindow // the ledger's compaction threshold
      } else if (event.type === 'compaction/summary') {
        state(session.id).compacted = true
      } else if (event.type === 'turn/end' && worker.state === 'running') {
        // Fresh history: the turn's events, durable first, then imported by the worker.
        setImmediate(() => {
          flush(session).then(() => worker.call('import', {
            session: session.id, cwd: session.header?.cwd ?? null
          }), () => {})
        })
      }
    } catch (e) {
      warn('event', `dsh-recall plugin: session event skipped (${e && e.message})`)
    }
  })

  // -- the stats route of the browser half -------------------------------------------------
  // Only where the runtime serves HTTP (the web profile's `connection`, behind its browser
  // auth); sdk and headless profiles have none and nothing changes there.
  // The figures are one worker `status` answer (the ledger's, per session and in all, with
  // the store's), fetched before a poll is answered when older than FRESH_MS: the chip, the
  // strip and the tab show one instant (an offload shows in all of them at once, D12).
  const totals = { answer: null, at: 0, pending: null }
  const fresh = () => {
    if (Date.now() - totals.at < FRESH_MS || worker.state !== 'running') return Promise.resolve()
    totals.pending ??= worker.call('status', { cwd: activity.lastCwd }, 1000, true).then((answer) => {
      if (answer?.objects && answer?.ledger) { totals.answer = answer; totals.at = Date.now() }
    }).finally(() => { totals.pending = null })
    return totals.pending
  }
  const numbers = (o, keys) => Object.fromEntries(keys.map((k) => [k, Number.isFinite(o?.[k]) ? o[k] : 0]))
  const LEDGER_KEYS = ['requests', 'offloads', 'reads_shortened', 'reclaimed', 'recall_messages', 'readback_requests', 'plain_prunes',
    'plain_compactions', 'tokens_kept_out', 'last_request_tokens_kept_out']
  // tokens_sent and saving are null where the provider reported no usage
  const figuresOf = (f) => ({ ...numbers(f, LEDGER_KEYS), tokens_sent: Number.isFinite(f?.tokens_sent) ? f.tokens_sent : null,
    saving: Number.isFinite(f?.saving) ? f.saving : null })
  const statsBody = () => {
    const a = totals.answer
    const sessions = {}
    for (const [id, f] of Object.entries(a?.ledger?.sessions ?? {}).slice(-200)) sessions[id] = figuresOf(f)
    return {
      version: 1,
      health: health.state,
      busy: activity.busy,
      // An auto-recall call runs now, and when the last one ended (the browser's long poll
      // is answered as either changes).
      recalling: activity.recalling > 0,
      lastDoneAt: activity.lastDoneAt,
      // The worker's own floors (the user's config): what is offloaded / shortened at all.
      floors: numbers(worker.floors, ['threshold_chars', 'read_chars']),
      // One snapshot: the store's objects (tokens_kept_out: the ledger's, every dsh request),
      // the ledger's totals and its sessions; `at`: when the worker answered.
      objects: numbers(a?.objects, ['offloaded', 'live', 'tokens_kept_out', 'recalls', 'disk_bytes']),
      totals: figuresOf(a?.ledger?.totals),
      sessions,
      at: totals.at
    }
  }
  // A long poll: `?wait=<recalling 0|1>:<lastDoneAt>` as the browser last saw them is held
  // until they change, or WAIT_MS (dsh 0.2.1rc2 gives a plugin's browser half no push
  // channel: the runtime forwards only a fixed list of its own host events).
  // While a recall runs the worker (one request at a time) answers no `status`: the answer
  // that says a recall started goes out at once, with the figures it has.
  const recallFirst = () => (activity.recalling > 0 ? undefined : fresh())
  const held = (request) => {
    let seen = null
    try { seen = new URL(request?.url ?? '', 'http://localhost').searchParams.get('wait') } catch {}
    const now = () => `${activity.recalling > 0 ? 1 : 0}:${activity.lastDoneAt}`
    if (seen === null || seen !== now() || waiters.size >= 32) return Promise.resolve()
    return new Promise((resolve) => {
      const done = () => { clearTimeout(timer); waiters.delete(done); resolve() }
      const timer = setTimeout(done, WAIT_MS)
      waiters.add(done)
    })
  }
  try {
    ctx.inject?.(['connection'], (sub) => {
      sub.connection.fetch.register({
        path: '/api/dsh-recall/stats',
        methods: ['GET'],
        requestBody: 'buffered',
        fetch: (request) => held(request).then(recallFirst).then(() => Response.json(statsBody(), { headers: { 'cache-control': 'no-store' } }))
      })
      // The card's "Restart the worker": a new worker now, with a fresh start budget (the
      // embedding key and the recall config are read at its start).
      sub.connection.fetch.register({
        path: '/api/dsh-recall/restart',
        methods: ['POST'],
        requestBody: 'buffered',
        fetch: () => {
          worker.restart('restarted from the web UI')
          return Promise.resolve(Response.json({ ok: worker.state === 'running', health: health.state },
            { headers: { 'cache-control': 'no-store' } }))
        }
      })
    })
  } catch (e) {
    warn('route', `dsh-recall plugin: no stats route for the web UI (${e && e.message})`)
  }

  const stop = () => worker.stop()
  if (typeof ctx.effect === 'function') {
    ctx.effect(() => stop)
  } else {
    ctx.on?.('dispose', stop)
  }
}
