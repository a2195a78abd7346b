// dsh-recall, browser half: what the native plugin does, shown in dsh's web UI (0.2.1rc2).
//
// Hand-written in the runtime's bundle format (a lazy factory registered with
// window.__ModuleLoader__; no build step). It registers, each on its own and guarded so a
// failure here never takes the page down:
//   plugins.item / plugins.bundle.config   the settings card over the `recall-native`
//                                          entry's volatile Config fields (configForms)
//   conversation.session.header.utilities  "Recall N · R× · S kept out" for this session
//   sidebar.right.pane.tab (+ .title)      the Recall tab (also a door on the right
//                                          sidebar's start page): the same figures
//   sidebar.footer.action                  the strip, in the left sidebar's foot (in the
//                                          layout's flow: it covers nothing): totals,
//                                          health, "Recalling…"
// Figures come from GET api/dsh-recall/stats (the host half's route, behind the runtime's own
// browser auth): counts only, never a path or a recalled text. Colours are the runtime's own
// --dsw-alias-* tokens (light and dark); words go through the runtime's locale service.
window.__ModuleLoader__.load({
  id: 'dsh-recall',
  factory: (require) => {
    const module = { exports: {} }
    const exports = module.exports

    const React = require('react')
    const h = React.createElement
    const optional = (name) => { try { return require(name) } catch { return {} } }
    const ui = optional('@deepseek-ai/dsh-client-ui-primitives')
    const storeLib = optional('@deepseek-ai/dsh-client-store')

    const ENTRY = 'recall-native' // the patch entry's id = the settings namespace
    const PACKAGE = 'dsh-recall'
    const NS = 'dshRecall.web' // our own locale namespace: a second register of one throws
    const TAB_ID = 'dsh-recall/recall'
    const TAB_KIND = 'dshRecall'
    const STATS = 'api/dsh-recall/stats'
    const RESTART = 'api/dsh-recall/restart'
    const POLL_MS = 1500
    const DONE_MS = 4000

    // The runtime's own theme tokens (dsh-client-ui-theme defines each on <body>, for light
    // and for body[data-ds-dark-theme]); no literal colour and no fallback that could hide a
    // name the stylesheet does not have.
    const C = {
      label: 'var(--dsw-alias-label-primary)',
      secondary: 'var(--dsw-alias-label-secondary)',
      tertiary: 'var(--dsw-alias-label-tertiary)',
      border: 'var(--dsw-alias-border-l2)',
      layer: 'var(--dsw-alias-bg-layer-1)',
      ok: 'var(--dsw-alias-state-success-primary)',
      warn: 'var(--dsw-alias-state-warn-primary)',
      error: 'var(--dsw-alias-state-error-primary)',
      idle: 'var(--dsw-alias-state-idle-primary)'
    }

    const en = {
      title: 'Recall',
      description: 'Offload, auto-recall and anchors for long sessions.',
      reaper: 'Offload big tool results',
      reads: 'Shorten whole-file reads to head + outline',
      autoRecall: 'Auto-recall history, notes and anchors',
      reclaim: 'Reclaim results already seen',
      minChars: 'Never send results under (chars)',
      minCharsHint: 'Saves the worker a call for small results; what is offloaded is decided by the worker\'s threshold above. 0–10,000,000; default 256.',
      callTimeoutMs: 'Worker call deadline (ms)',
      callTimeoutMsHint: 'How long dsh waits for an offload or a recall before going on without it. 50–60,000; default 1,500.',
      startTimeoutMs: 'Worker start deadline (ms)',
      startTimeoutMsHint: 'How long a starting worker may take to say it is ready. 50–120,000; default 1,500.',
      hangMs: 'Stop a worker silent this long (ms)',
      hangMsHint: 'A worker that answers nothing this long after a deadline is stopped. 1,000–3,600,000; default 60,000.',
      thresholds: 'The worker offloads results over {offload} chars and shortens whole-file reads over {read} chars (objects.threshold_chars and reads.outline_over_chars in the recall config).',
      thresholdsUnknown: 'The worker\'s offload threshold (objects.threshold_chars in the recall config, 2,500 chars by default) decides what is offloaded.',
      embedderApiKey: 'Embedding endpoint key',
      embedderApiKeyHint: 'Write-only: never sent back to this page. The worker reads it when it starts: restart it below to use a new key now.',
      secretSet: 'Set',
      secretUnset: 'Not set',
      live: 'Changes apply at once, without a restart.',
      overridden: 'Overridden',
      reset: 'Reset to default',
      readOnly: 'This deployment stores settings read-only.',
      unavailable: 'The dsh-recall plugin is not loaded, so it cannot be configured right now.',
      save: 'Save',
      saving: 'Saving…',
      saveFailed: 'Not saved.',
      saveFailedField: 'Not saved: see {field}.',
      refusedAtLeast: 'Must be at least {min}.',
      refusedAtMost: 'Must be at most {max}.',
      refusedRejected: 'Not accepted by dsh: {reason}',
      invalidNumber: 'Enter a whole number, or leave blank to use the default.',
      restart: 'Restart the worker',
      restarting: 'Restarting…',
      restarted: 'Worker restarted.',
      restartFailed: 'The worker could not be restarted.',
      recalling: 'Recalling…',
      complete: 'Recall complete',
      tab: 'Recall',
      tabGuide: 'What dsh-recall kept out of this conversation',
      chipOffloads: 'Recall {n}',
      chipKept: '{size} kept out',
      stripScope: 'All conversations:',
      offloadsOne: '{n} offload',
      offloadsMany: '{n} offloads',
      tokensOne: '{n} token kept out',
      tokensMany: '{n} tokens kept out',
      hitsOne: '{n} hit',
      hitsMany: '{n} hits',
      onDisk: '{size} on disk',
      rowOffloads: 'Offloads in this conversation',
      rowChars: 'Characters in / shown',
      rowKept: 'Kept out (estimate)',
      rowReads: 'Whole-file reads shortened',
      rowReclaimed: 'Results reclaimed',
      rowRecallMessages: 'Auto-recall messages',
      rowTokensKept: 'Tokens kept out of requests',
      rowTokensSent: 'Tokens sent (provider)',
      rowAllOffloads: 'Offloads, all sessions',
      rowHits: 'Recall hits',
      rowDisk: 'On disk',
      rowWorker: 'Worker',
      sectionSession: 'This conversation',
      sectionHome: 'Recall home',
      notesLedger: 'Per conversation, from the worker\'s ledger: at each model request, the tokens its offloads, shortened reads and reclaims kept out of that request against what plain dsh would have sent (request characters / 4; an auto-recall message counts as a cost). Totals and disk use are for the whole recall home.',
      notes: 'Offloads and the ratio count this conversation in this dsh process. "Kept out" is an estimate: characters of tool output the model did not have to read again, at about 4 per token, an upper bound when the model recalled parts back. Totals and disk use are for the whole recall home.',
      healthReady: 'running',
      healthDegraded: 'degraded',
      healthWith: '{state}: {reason}',
      'health.new': 'not started yet',
      'health.starting': 'the worker has not printed its ready line',
      'health.slow': 'a worker call took over its deadline',
      'health.hung': 'the worker stopped answering',
      'health.dead': 'the worker exited; the next request restarts it',
      'health.disabled': 'the worker gave up for this dsh process',
      'health.absent': 'the host half is not loaded in this profile',
      'health.unknown': 'unknown state'
    }
    const zh = {
      title: '召回',
      description: '长会话的卸载、自动召回与锚点。',
      reaper: '卸载大的工具结果',
      reads: '整文件读取缩短为开头 + 大纲',
      autoRecall: '自动召回历史、笔记与锚点',
      reclaim: '回收已读过的结果',
      minChars: '小于此大小的结果不发送（字符）',
      minCharsHint: '小结果省去一次工作进程调用；是否卸载由上方工作进程的阈值决定。0–10,000,000；默认 256。',
      callTimeoutMs: '工作进程调用时限（毫秒）',
      callTimeoutMsHint: 'dsh 等待卸载或召回的时长，超时后不再等待。50–60,000；默认 1,500。',
      startTimeoutMs: '工作进程启动时限（毫秒）',
      startTimeoutMsHint: '启动中的工作进程报告就绪的最长时间。50–120,000；默认 1,500。',
      hangMs: '无响应多久后停止工作进程（毫秒）',
      hangMsHint: '超过时限后仍无任何应答这么久的工作进程会被停止。1,000–3,600,000；默认 60,000。',
      thresholds: '工作进程卸载超过 {offload} 字符的结果，并缩短超过 {read} 字符的整文件读取（召回配置中的 objects.threshold_chars 与 reads.outline_over_chars）。',
      thresholdsUnknown: '卸载与否由工作进程的阈值决定（召回配置中的 objects.threshold_chars，默认 2,500 字符）。',
      embedderApiKey: '嵌入服务密钥',
      embedderApiKeyHint: '只写：不会回传到此页面。工作进程启动时读取；如需立即使用新密钥，请在下方重启工作进程。',
      secretSet: '已设置',
      secretUnset: '未设置',
      live: '更改立即生效，无需重启。',
      overridden: '已覆盖',
      reset: '恢复默认',
      readOnly: '此部署的设置为只读。',
      unavailable: 'dsh-recall 插件未加载，暂时无法配置。',
      save: '保存',
      saving: '保存中…',
      saveFailed: '未保存。',
      saveFailedField: '未保存：请检查「{field}」。',
      refusedAtLeast: '不能小于 {min}。',
      refusedAtMost: '不能大于 {max}。',
      refusedRejected: 'dsh 未接受：{reason}',
      invalidNumber: '请输入整数，或留空以使用默认值。',
      restart: '重启工作进程',
      restarting: '正在重启…',
      restarted: '工作进程已重启。',
      restartFailed: '无法重启工作进程。',
      recalling: '正在召回…',
      complete: '召回完成',
      tab: '召回',
      tabGuide: 'dsh-recall 为此会话省下的内容',
      chipOffloads: '召回 {n}',
      chipKept: '省下 {size}',
      stripScope: '全部会话：',
      offloadsOne: '{n} 次卸载',
      offloadsMany: '{n} 次卸载',
      tokensOne: '省下 {n} 个 token',
      tokensMany: '省下 {n} 个 token',
      hitsOne: '{n} 次命中',
      hitsMany: '{n} 次命中',
      onDisk: '磁盘占用 {size}',
      rowOffloads: '此会话的卸载次数',
      rowChars: '字符数：输入 / 展示',
      rowKept: '省下（估算）',
      rowReads: '缩短的整文件读取',
      rowReclaimed: '回收的结果',
      rowRecallMessages: '自动召回消息',
      rowTokensKept: '请求中省下的 token',
      rowTokensSent: '已发送的 token（服务商）',
      rowAllOffloads: '所有会话的卸载次数',
      rowHits: '召回命中',
      rowDisk: '磁盘占用',
      rowWorker: '工作进程',
      sectionSession: '此会话',
      sectionHome: '召回库',
      notesLedger: '按会话统计，来自工作进程的账本：每次模型请求时，卸载、缩短的读取与回收为该请求省下的 token，对比原生 dsh 会发送的内容（请求字符数 / 4；自动召回消息计为成本）。总数与磁盘占用针对整个召回库。',
      notes: '卸载次数与比例只统计此 dsh 进程中的此会话。“省下”为估算：模型无需再次读取的工具输出字符数，约 4 字符折 1 token；模型召回部分内容后，它是上限。总数与磁盘占用针对整个召回库。',
      healthReady: '运行中',
      healthDegraded: '降级',
      healthWith: '{state}：{reason}',
      'health.new': '尚未启动',
      'health.starting': '工作进程尚未报告就绪',
      'health.slow': '一次工作进程调用超过了时限',
      'health.hung': '工作进程停止应答',
      'health.dead': '工作进程已退出；下一个请求会重启它',
      'health.disabled': '工作进程在此 dsh 进程中已放弃',
      'health.absent': '此配置未加载宿主端',
      'health.unknown': '未知状态'
    }

    // Words: the runtime's `t` (a slot registered with `locale: NS` gets one, bound to the
    // active locale) or, outside the runtime (the unit test), the English dictionary.
    const fill = (text, vars) => String(text).replace(/\{(\w+)\}/g, (m, k) => (vars && k in vars ? String(vars[k]) : m))
    const english = (k, vars) => fill(en[k] ?? k, vars)
    const words = (t) => {
      if (typeof t !== 'function') return english
      return (k, vars) => {
        let v
        try { v = t(k, vars) } catch {}
        return typeof v === 'string' && v !== k && v !== `${NS}.${k}` ? fill(v, vars) : english(k, vars)
      }
    }

    // -- small helpers ------------------------------------------------------------------
    function createStore (initial) {
      if (typeof storeLib.createSnapshotStore === 'function') return storeLib.createSnapshotStore(initial)
      let value = initial
      const listeners = new Set()
      return {
        getSnapshot: () => value,
        subscribe: (fn) => { listeners.add(fn); return () => listeners.delete(fn) },
        set: (next) => { value = next; for (const fn of listeners) fn() },
        update: (fn) => { const draft = { ...value }; fn(draft); value = draft; for (const l of listeners) l() }
      }
    }

    // A component the runtime's React can render: a function, or one of React's wrapper
    // objects (React.memo / forwardRef: dsh's TextShimmer is a memo object).
    const renderable = (c) => typeof c === 'function' || (c !== null && typeof c === 'object' && typeof c.$$typeof === 'symbol')
    const shimmer = (text) => (renderable(ui.TextShimmer) ? h(ui.TextShimmer, { active: true }, text) : text)

    function bytes (n) {
      if (!Number.isFinite(n) || n < 0) return '0 B'
      if (n < 1000) return `${Math.round(n)} B`
      if (n < 1e6) return `${(n / 1000).toFixed(n < 1e4 ? 1 : 0)} KB`
      if (n < 1e9) return `${(n / 1e6).toFixed(1)} MB`
      return `${(n / 1e9).toFixed(1)} GB`
    }
    const int = (v) => (Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0)
    const ratio = (a, b) => (b > 0 && a > b ? Math.round(a / b) : 0)
    const num = (n) => n.toLocaleString('en-US')
    // One figure and its unit never break across lines ("107 KB", "29,250 tokens kept out").
    const keep = (text, key) => h('span', { key, style: { whiteSpace: 'nowrap' } }, text)
    const joined = (parts) => parts.flatMap((p, i) => (i ? [' · ', p] : [p]))

    // A session's figures as the host half sends them: the ledger's (tokens kept out of the
    // model's requests, D11/D12), or an older host's (characters in / shown).
    const ledgerShape = (s) => Number.isFinite(s?.tokens_kept_out)
    const changesOf = (s) => int(s?.offloads) + int(s?.reads_shortened) + int(s?.reclaimed)
    // Where plain dsh would have pruned its own context, the ledger cannot see what its model
    // would then have fetched again: the figure is a floor ("≥ n"); where it would have
    // summarized, nor its summary and tail: an estimate ("≈ n"). docs/report.md.
    const floorOf = (s) => int(s?.plain_compactions) > 0 ? '≈ ' : int(s?.plain_prunes) > 0 ? '≥ ' : ''

    // The figures one session shows (chip and tab), or null when there is nothing to say.
    function sessionParts (s, t = english) {
      if (!s || changesOf(s) === 0) return null
      if (ledgerShape(s)) {
        const n = int(s.tokens_kept_out)
        return [t('chipOffloads', { n: num(int(s.offloads)) }), t(n === 1 ? 'tokensOne' : 'tokensMany', { n: floorOf(s) + num(n) })]
      }
      const r = ratio(int(s.charsIn), int(s.charsInline))
      return [t('chipOffloads', { n: num(int(s.offloads)) }), ...(r ? [`${r}×`] : []),
        t('chipKept', { size: bytes(int(s.keptChars)) })]
    }
    const sessionLine = (s, t) => { const p = sessionParts(s, t); return p ? p.join(' · ') : null }

    // The recall home's totals, as MCP `status` reports them (the same worker answer).
    function stripParts (st, t = english) {
      const o = st.objects || {}
      const n = (v, one, many, pre = '') => t(int(v) === 1 ? one : many, { n: pre + num(int(v)) })
      // The chip and the tab speak of one conversation; the strip of the whole recall home.
      return [`${t('stripScope')} ${n(o.offloaded, 'offloadsOne', 'offloadsMany')}`,
        n(o.tokens_kept_out, 'tokensOne', 'tokensMany', floorOf(st.totals)),
        n(o.recalls, 'hitsOne', 'hitsMany'), t('onDisk', { size: bytes(int(o.disk_bytes)) })]
    }
    const stripLine = (st, t) => stripParts(st, t).join(' · ')

    const TONE = { ready: 'ok', new: 'idle', absent: 'idle', starting: 'warn', slow: 'warn', hung: 'error', dead: 'error', disabled: 'error' }
    function healthOf (st, t = english) {
      const state = typeof st.health === 'string' ? st.health : 'absent'
      const tone = TONE[state] || 'warn'
      if (state === 'ready') return { ok: true, state, tone, label: t('healthReady'), reason: '', text: t('healthReady') }
      const reason = t(Object.hasOwn(TONE, state) ? `health.${state}` : 'health.unknown')
      const label = t('healthDegraded')
      return { ok: false, state, tone, label, reason, text: t('healthWith', { state: label, reason }) }
    }

    // One poller for every mounted surface: started by the first subscriber. The runtime
    // gives a plugin's browser half no push channel (its remote events are a fixed list of
    // the runtime's own), so the poll is a long poll: it sends what it last saw of the
    // auto-recall (`wait=<recalling>:<lastDoneAt>`) and the host half answers as soon as that
    // changes, or after one poll period when nothing does. The sweep runs from the start of
    // the real recall call to its end; "Recall complete" follows it.
    const activityKey = (x) => `${x.recalling ? 1 : 0}:${int(x.lastDoneAt)}`
    function createStats (fetcher, now = () => Date.now()) {
      const store = createStore({ loaded: false, ok: false, health: 'absent', objects: {}, sessions: {},
        floors: null, recalling: false, lastDoneAt: 0, complete: false, completeAt: 0 })
      let timer = null
      let users = 0
      let seenDone = null
      let wasRecalling = false
      let sent = null
      const tick = async () => {
        timer = null
        let next
        const asked = now()
        const key = sent
        try {
          const url = key === null ? STATS : `${STATS}?wait=${encodeURIComponent(key)}`
          const res = await fetcher(url, { credentials: 'same-origin', cache: 'no-store' })
          next = res.ok ? await res.json() : null
        } catch { next = null }
        const prev = store.getSnapshot()
        let delay = POLL_MS
        if (!next || typeof next !== 'object') {
          store.set({ ...prev, loaded: true, ok: false })
          sent = null
        } else {
          const done = int(next.lastDoneAt)
          const recalling = next.recalling === true
          // "Recall complete" once after a sweep (or a recall that ran between two answers),
          // for a few seconds, never on first load.
          const complete = !recalling && seenDone !== null && (wasRecalling || done > seenDone)
          if (seenDone === null || done > seenDone) seenDone = done
          wasRecalling = recalling
          const stamp = now()
          store.set({ loaded: true, ok: true, health: next.health, objects: next.objects || {},
            sessions: next.sessions || {}, floors: next.floors && typeof next.floors === 'object' ? next.floors : null,
            recalling, lastDoneAt: done,
            complete: complete || (prev.complete && !recalling && stamp - prev.completeAt < DONE_MS),
            completeAt: complete ? stamp : prev.completeAt })
          sent = activityKey(next)
          // The host held the answer (or something changed): ask again at once. An answer
          // that came back at once with nothing changed is a host half that does not wait.
          if (key !== sent || now() - asked >= POLL_MS / 2) delay = 0
        }
        if (users > 0) timer = setTimeout(tick, delay)
      }
      return {
        store,
        acquire () {
          users += 1
          if (users === 1 && timer === null) tick()
          return () => {
            users -= 1
            if (users === 0 && timer !== null) { clearTimeout(timer); timer = null }
          }
        }
      }
    }

    // A failing render of ours renders nothing instead of unmounting the page.
    class Guard extends React.Component {
      constructor (props) { super(props); this.state = { failed: false } }
      static getDerivedStateFromError () { return { failed: true } }
      componentDidCatch (error) { try { console.warn('dsh-recall: a view failed', error) } catch {} }
      render () { return this.state.failed ? null : this.props.children }
    }
    const guarded = (Component, name) => {
      const Wrapped = (props) => h(Guard, null, h(Component, props))
      Wrapped.displayName = `DshRecall${name}`
      return Wrapped
    }

    function testThrow (where) {
      try {
        if (globalThis.localStorage?.getItem('dsh-recall.test.throw') === where) throw new Error(`dsh-recall test flag: throw in ${where}`)
      } catch (e) {
        if (String(e?.message).startsWith('dsh-recall test flag')) throw e
      }
    }

    function useAcquire (stats) {
      React.useEffect(() => stats?.acquire?.(), [])
    }

    // -- the settings card ----------------------------------------------------------------
    const BOOLEAN = ['reaper', 'reads', 'autoRecall', 'reclaim']
    const NUMBER = ['minChars', 'callTimeoutMs', 'startTimeoutMs', 'hangMs']
    const SECRET = 'embedderApiKey'

    function booleanField (field) {
      return {
        field,
        format: (v) => (v === true ? 'true' : v === false ? 'false' : ''),
        parse: (text) => {
          const t = String(text).trim()
          if (t === '') return { kind: 'clear' }
          if (t === 'true' || t === 'false') return { kind: 'set', value: t === 'true' }
          return undefined
        }
      }
    }
    function numberField (field) {
      if (typeof ui.settingsNumberField === 'function') {
        const base = ui.settingsNumberField(field)
        return { ...base, parse: (text) => { const r = base.parse(text); return r?.kind === 'set' && (!Number.isInteger(r.value) || r.value < 0) ? undefined : r } }
      }
      return {
        field,
        format: (v) => (typeof v === 'number' ? String(v) : ''),
        parse: (text) => {
          const t = String(text).trim()
          if (t === '') return { kind: 'clear' }
          const n = Number(t)
          return Number.isInteger(n) && n >= 0 ? { kind: 'set', value: n } : undefined
        }
      }
    }

    // Whether the runtime holds a value for the secret: the settings document's namespace
    // row says so in `secrets[].set` (the value itself never rides a response; the form
    // controller's snapshot does not carry the flag, the shared describe mirror does).
    function secretSetIn (mirror) {
      try {
        const snap = mirror?.getSnapshot?.()
        const row = snap?.view?.namespaces?.find?.((r) => r?.ns === ENTRY) ?? mirror?.namespace?.(ENTRY)
        const slot = (Array.isArray(row?.secrets) ? row.secrets : [])
          .find((x) => Array.isArray(x?.path) && x.path.length === 1 && x.path[0] === SECRET)
        return slot?.set === true
      } catch { return false }
    }


    // A refusal from the runtime, for people: Schemastery says "$.callTimeoutMs expected
    // number >= 50 but got 10" (the settings service may wrap it). The field it names is
    // marked, the reason said once, under that field.
    function readRefusal (message, t = english) {
      const text = String(message ?? '')
      const m = /\$\.([A-Za-z_]\w*)\s+(.*)$/s.exec(text)
      const field = m && [...BOOLEAN, ...NUMBER, SECRET].includes(m[1]) ? m[1] : null
      const rest = m ? m[2] : text
      const ge = /expected [\w ]*?>= (-?[\d.e+]+)/.exec(rest)
      const le = /expected [\w ]*?<= (-?[\d.e+]+)/.exec(rest)
      const shown = (v) => (Number.isFinite(Number(v)) ? num(Number(v)) : v)
      const reason = ge ? t('refusedAtLeast', { min: shown(ge[1]) })
        : le ? t('refusedAtMost', { max: shown(le[1]) })
          : t('refusedRejected', { reason: (field ? rest : text).trim().slice(0, 300) })
      return { field, reason }
    }

    // The card's state over the settings scope: SettingsFormModel when the runtime has it,
    // and the runtime's own reason when it refuses a save.
    function createCard (scope, remote, mirror) {
      const refusal = createStore({ message: '', field: null })
      // A refused write: the same ops are asked once more through the settings remote, for
      // the runtime's reason (the form controller answers only true / false).
      const explain = async (ops) => {
        let message = ''
        try {
          const r = await remote()?.settings?.mutate?.(ENTRY, ops, scope.getSnapshot().revision)
          if (r && r.ok === false && r.error?.message) message = String(r.error.message).slice(0, 400)
          else if (r && r.ok) return true
        } catch {}
        refusal.set({ message, field: message ? readRefusal(message).field : null })
        return false
      }
      // Writes go through the form controller (it refreshes the mirror).
      const explained = {
        getSnapshot: () => scope.getSnapshot(),
        subscribe: (fn) => scope.subscribe(fn),
        set: (f, v) => scope.set(f, v),
        unset: (f) => scope.unset(f),
        mutate: async (ops, revision) => {
          refusal.set({ message: '', field: null })
          const ok = await scope.mutate(ops, revision)
          return ok || explain(ops)
        }
      }
      const specs = [...BOOLEAN.map(booleanField), ...NUMBER.map(numberField)]
      const writeSecret = async (text) => {
        const ok = await scope.set(SECRET, text)
        return ok || explain([{ op: 'set', path: [SECRET], value: text }])
      }
      const secrets = [{ field: SECRET, write: writeSecret }]
      const form = renderable(ui.SettingsFormModel) && typeof ui.SettingsFormModel === 'function' ? new ui.SettingsFormModel(explained, specs, secrets) : null
      const project = () => {
        const snap = scope.getSnapshot() || {}
        const shell = form ? form.shell() : { available: snap.status === 'ready', writable: !!snap.writable, dirty: false, invalid: false, saving: false, failed: false }
        const fields = {}
        for (const s of specs) fields[s.field] = form ? form.field(s.field) : { text: s.format(snap.value?.[s.field]), overridden: false, invalid: false }
        fields[SECRET] = form ? form.field(SECRET) : { text: '' }
        const r = refusal.getSnapshot()
        return { ...shell, fields, refusal: r.message, refusedField: r.field, secretSet: secretSetIn(mirror) }
      }
      const store = form ? form.bind(project) : createStore(project())
      refusal.subscribe(() => store.set(project()))
      if (!form) scope.subscribe(() => store.set(project()))
      const offMirror = typeof mirror?.subscribe === 'function' ? mirror.subscribe(() => store.set(project())) : null
      const base = form ? form.actions() : { edit: () => {}, resetField: () => {}, save: () => {}, discard: () => {} }
      // Editing the field a refusal named takes its mark away.
      const unmark = (f) => { if (refusal.getSnapshot().field === f) refusal.set({ message: '', field: null }) }
      const actions = { ...base, edit: (f, text) => { unmark(f); base.edit(f, text) }, resetField: (f) => { unmark(f); base.resetField(f) } }
      return { store, actions, dispose: () => { form?.dispose(); try { offMirror?.() } catch {} } }
    }

    // Asks the host half to restart its worker (POST, behind the runtime's browser auth).
    function createRestart (fetcher) {
      const store = createStore({ state: 'idle' })
      const run = async () => {
        if (store.getSnapshot().state === 'running') return
        store.set({ state: 'running' })
        let ok = false
        try {
          const res = await fetcher(RESTART, { method: 'POST', credentials: 'same-origin', cache: 'no-store', headers: { 'content-type': 'application/json' }, body: '{}' })
          ok = !!res.ok && (await res.json())?.ok === true
        } catch {}
        store.set({ state: ok ? 'done' : 'failed' })
      }
      return { store, run }
    }

    const hintStyle = { color: C.secondary, fontSize: 13, lineHeight: '20px', fontWeight: 400, margin: '0 0 12px' }

    function Card (props) {
      const t = words(props.t)
      const state = props.useRecallCard((s) => s)
      const floors = props.useRecallStats ? props.useRecallStats((st) => st.floors) : null
      const restart = props.useRecallRestart ? props.useRecallRestart((r) => r.state) : 'idle'
      useAcquire(props.stats)
      if (props.view === 'summary') return t('description')
      if (!state.available) return h('p', { role: 'status', 'data-dsh-recall': 'unavailable', style: hintStyle }, t('unavailable'))
      const disabled = !state.writable || state.saving
      const refused = state.failed && state.refusal ? readRefusal(state.refusal, t) : null
      const rows = []
      for (const f of BOOLEAN) {
        const field = state.fields[f]
        const checked = field.text === 'true'
        const onChange = (next) => props.edit(f, next ? 'true' : 'false')
        rows.push(h('div', { key: f, 'data-field': f, style: { display: 'flex', alignItems: 'center', gap: 12, margin: '10px 0', color: C.label } },
          renderable(ui.Switch)
            ? h(ui.Switch, { checked, onChange, label: t(f), disabled })
            : h('input', { type: 'checkbox', checked, disabled, onChange: (e) => onChange(e.target.checked), 'aria-label': t(f) }),
          h('span', null, t(f))))
      }
      const known = floors && Number.isFinite(floors.threshold_chars) && floors.threshold_chars > 0
      rows.push(h('p', { key: 'thresholds', 'data-dsh-recall': 'thresholds', style: { ...hintStyle, margin: '12px 0 4px' } },
        known ? t('thresholds', { offload: num(int(floors.threshold_chars)), read: num(int(floors.read_chars)) }) : t('thresholdsUnknown')))
      for (const f of NUMBER) {
        const field = state.fields[f]
        const mine = refused && refused.field === f
        const common = { id: `dsh-recall-${f}`, label: t(f), hint: t(`${f}Hint`), overriddenLabel: t('overridden'), resetLabel: t('reset'),
          invalidLabel: t('invalidNumber'), numeric: true, disabled, ...field,
          ...(mine ? { invalid: true, invalidLabel: refused.reason } : {}),
          onEdit: (text) => props.edit(f, text), onReset: () => props.resetField(f) }
        rows.push(h('div', { key: f, 'data-field': f, ...(mine ? { 'data-refused': 'true' } : {}) },
          renderable(ui.SettingsValueField)
            ? h(ui.SettingsValueField, common)
            : h('label', null, t(f), ' ', h('input', { id: common.id, value: field.text, disabled, 'aria-invalid': common.invalid ? 'true' : undefined, onChange: (e) => props.edit(f, e.target.value) }),
              h('span', { 'data-part': 'hint' }, common.invalid ? common.invalidLabel : common.hint))))
      }
      const secret = state.fields[SECRET]
      const secretProps = { id: 'dsh-recall-embedderApiKey', label: t('embedderApiKey'), hint: t('embedderApiKeyHint'),
        stateLabel: state.secretSet ? t('secretSet') : t('secretUnset'), configured: state.secretSet, text: secret.text,
        disabled, onEdit: (text) => props.edit(SECRET, text) }
      rows.push(h('div', { key: SECRET, 'data-field': SECRET, 'data-secret-set': String(!!state.secretSet) },
        renderable(ui.SettingsSecretField)
          ? h(ui.SettingsSecretField, secretProps)
          : h('label', null, t('embedderApiKey'), ' ', h('span', { 'data-part': 'secret-state' }, secretProps.stateLabel), ' ',
            h('input', { id: secretProps.id, type: 'password', value: secret.text, disabled, onChange: (e) => props.edit(SECRET, e.target.value) }))))
      const restartLabel = restart === 'running' ? t('restarting') : t('restart')
      const restartButton = renderable(ui.Button)
        ? h(ui.Button, { variant: 'outline', size: 'sm', 'data-dsh-recall': 'restart-button', disabled: restart === 'running', onClick: () => props.restartWorker?.() }, restartLabel)
        : h('button', { type: 'button', 'data-dsh-recall': 'restart-button', disabled: restart === 'running', onClick: () => props.restartWorker?.() }, restartLabel)
      rows.push(h('div', { key: 'restart', 'data-dsh-recall': 'restart', 'data-state': restart, style: { display: 'flex', alignItems: 'center', gap: 12, margin: '12px 0 4px' } },
        restartButton,
        restart === 'done' || restart === 'failed'
          ? h('span', { role: 'status', style: { fontSize: 13, color: restart === 'done' ? C.secondary : C.error } }, restart === 'done' ? t('restarted') : t('restartFailed'))
          : null))
      // A refusal is said once: under the field it names (the footer points there), or, for
      // one that names no field, in the form's own footer.
      const failedText = refused ? (refused.field ? t('saveFailedField', { field: t(refused.field) }) : refused.reason) : t('saveFailed')
      const labels = { unavailable: t('unavailable'), readOnly: t('readOnly'), saveFailed: failedText, save: t('save'), saving: t('saving') }
      const note = h('p', { key: 'live', 'data-dsh-recall': 'live', style: hintStyle }, t('live'))
      const body = [note, ...rows]
      const root = { 'data-dsh-recall': 'card', ...(state.failed ? { 'data-refused': refused?.field || 'form' } : {}) }
      if (renderable(ui.SettingsForm)) {
        return h('div', root, h(ui.SettingsForm, { labels, state, onSave: props.save, onDiscard: props.discard, children: body }))
      }
      return h('div', root, ...body,
        state.failed ? h('p', { key: 'refusal', role: 'status', 'data-dsh-recall': 'refusal', style: { color: C.error, fontSize: 13 } }, failedText) : null,
        h('button', { type: 'button', disabled: !state.dirty || state.invalid || disabled, onClick: props.save }, state.saving ? t('saving') : t('save')))
    }

    // -- chip, tab, strip -----------------------------------------------------------------
    function Chip (props) {
      testThrow('render')
      useAcquire(props.stats)
      const t = words(props.t)
      const s = props.useRecallStats((st) => st.sessions?.[props.sessionId])
      const recalling = props.useRecallStats((st) => st.recalling === true)
      const parts = sessionParts(s, t)
      if (!parts) return null
      const line = joined(parts.map((p, i) => keep(p, i)))
      return h('button', {
        type: 'button',
        'data-dsh-recall': 'chip',
        'data-offloads': int(s.offloads),
        'data-kept-chars': int(s.keptChars),
        'data-tokens-kept-out': int(s.tokens_kept_out),
        title: t(ledgerShape(s) ? 'notesLedger' : 'notes'),
        onClick: () => props.openTab?.(props.sessionId),
        style: { font: 'inherit', fontSize: 12, lineHeight: '18px', padding: '1px 8px', borderRadius: 999, cursor: 'pointer', whiteSpace: 'nowrap',
          border: `1px solid ${C.border}`, background: 'transparent', color: C.secondary }
      }, recalling ? shimmer(h(React.Fragment, null, ...line)) : line)
    }

    const rowStyle = { dt: { color: C.secondary, margin: 0 }, dd: { color: C.label, margin: 0, textAlign: 'right', fontVariantNumeric: 'tabular-nums', whiteSpace: 'nowrap' } }
    function Section ({ title, rows }) {
      return h('section', { style: { margin: '0 0 16px' } },
        h('h3', { style: { fontSize: 12, fontWeight: 600, color: C.tertiary, margin: '0 0 8px', textTransform: 'none' } }, title),
        h('dl', { style: { display: 'grid', gridTemplateColumns: 'minmax(0, 1fr) auto', gap: '6px 16px', margin: 0, padding: '10px 12px', borderRadius: 10, border: `1px solid ${C.border}`, background: C.layer } },
          ...rows.flatMap(([k, v, extra]) => [h('dt', { key: `${k}:k`, style: rowStyle.dt }, k), h('dd', { key: `${k}:v`, style: { ...rowStyle.dd, ...(extra || {}) } }, v)])))
    }

    function Tab (props) {
      useAcquire(props.stats)
      const t = words(props.t)
      const s = props.useRecallStats((st) => st.sessions?.[props.sessionId])
      const st = props.useRecallStats((x) => x)
      const health = healthOf(st, t)
      return h('div', { 'data-dsh-recall': 'tab', style: { padding: 16, fontSize: 13, lineHeight: '20px', color: C.label } },
        h(Section, { title: t('sectionSession'), rows: ledgerShape(s) ? [
          [t('rowOffloads'), num(int(s.offloads))],
          [t('rowReads'), num(int(s.reads_shortened))],
          [t('rowReclaimed'), num(int(s.reclaimed))],
          [t('rowRecallMessages'), num(int(s.recall_messages))],
          [t('rowTokensKept'), floorOf(s) + num(int(s.tokens_kept_out))],
          [t('rowTokensSent'), Number.isFinite(s.tokens_sent) ? num(int(s.tokens_sent)) : '—']
        ] : [
          [t('rowOffloads'), num(int(s?.offloads))],
          [t('rowChars'), `${num(int(s?.charsIn))} / ${num(int(s?.charsInline))}`],
          [t('rowKept'), bytes(int(s?.keptChars))]] }),
        h(Section, { title: t('sectionHome'), rows: [
          [t('rowAllOffloads'), num(int(st.objects?.offloaded))],
          [t('rowHits'), num(int(st.objects?.recalls))],
          [t('rowDisk'), bytes(int(st.objects?.disk_bytes))],
          [t('rowWorker'), health.text, { color: C[health.tone], whiteSpace: 'normal' }]] }),
        h('p', { style: { margin: 0, color: C.tertiary, fontSize: 12, lineHeight: '18px' } }, t(ledgerShape(s) ? 'notesLedger' : 'notes')))
    }

    function TabTitle (props) { return words(props.t)('tab') }

    function Dot ({ tone }) {
      return h('span', { 'aria-hidden': 'true', 'data-part': 'dot', 'data-tone': tone,
        style: { display: 'inline-block', flex: 'none', width: 6, height: 6, borderRadius: '50%', background: C[tone], margin: '0 5px 1px 0', verticalAlign: 'middle' } })
    }

    // The strip sits in the left sidebar's foot (sidebar.footer.action, above "More"): in the
    // layout's own flow, so it takes its room from the session list instead of lying over
    // it, and it covers no control at any window size. On the 56 px rail (sidebar shut, or
    // a narrow window) it is the health dot alone, its figures in its title.
    function Strip (props) {
      testThrow('render')
      useAcquire(props.stats)
      const t = words(props.t)
      const st = props.useRecallStats((x) => x)
      if (!st.loaded || !st.ok) return null
      const health = healthOf(st, t)
      const o = st.objects || {}
      const parts = stripParts(st, t)
      let activity = null
      if (st.recalling) activity = shimmer(t('recalling'))
      else if (st.complete) activity = t('complete')
      const data = {
        'data-dsh-recall': 'strip',
        'data-wide': String(props.wide !== false),
        'data-health': health.ok ? 'running' : 'degraded',
        'data-recalling': String(!!st.recalling),
        'data-offloads': int(o.offloaded),
        'data-tokens-kept-out': int(o.tokens_kept_out),
        'data-recalls': int(o.recalls),
        'data-disk-bytes': int(o.disk_bytes),
        role: 'status'
      }
      if (props.wide === false) {
        return h('div', { ...data, title: [...parts, health.text].join(' · '), 'aria-label': [...parts, health.text].join(' · '),
          style: { display: 'flex', alignItems: 'center', justifyContent: 'center', width: 36, height: 20, margin: '2px 0' } },
        h(Dot, { tone: st.recalling ? 'idle' : health.tone }))
      }
      return h('div', { ...data,
        style: { flex: '1 1 auto', minWidth: 0, boxSizing: 'border-box', margin: '4px 0', padding: '5px 10px', borderRadius: 10,
          border: `1px solid ${C.border}`, background: C.layer, color: C.secondary, fontSize: 11, lineHeight: '16px', overflowWrap: 'normal' } },
      h('span', { 'data-part': 'figures' }, ...joined(parts.map((p, i) => keep(p, i)))),
      ' · ',
      h('span', { 'data-part': 'health', 'data-tone': health.tone, title: health.reason || undefined, style: { whiteSpace: 'nowrap', color: health.ok ? C.secondary : C[health.tone] } },
        h(Dot, { tone: health.tone }), health.ok ? health.label : health.text),
      activity ? h('span', { 'data-part': 'activity', style: { whiteSpace: 'nowrap' } }, ' · ', activity) : null)
    }

    // -- registration ---------------------------------------------------------------------
    // Only services the web profile always has; the sidebar's are asked for inside apply.
    const inject = ['slots', 'locale', 'configForms']

    function apply (ctx) {
      const failures = []
      const guard = (what, fn) => {
        try { return fn() } catch (e) {
          failures.push(what)
          try { console.warn(`dsh-recall: ${what} not registered`, e) } catch {}
        }
      }
      const effect = (what, fn) => guard(what, () => ctx.effect(() => {
        try { return fn() } catch (e) {
          failures.push(what)
          try { console.warn(`dsh-recall: ${what} failed`, e) } catch {}
          return () => {}
        }
      }, `dsh-recall: ${what}`))
      const slot = (name, options, Component) => effect(name, () => ctx.slots.inject(name, () => ctx.slots.register({ name, locale: NS, ...options }, Component)))

      guard('test flag', () => testThrow('apply'))
      effect('dictionaries', () => ctx.locale.register(NS, { en, zh }))
      // Labels read outside a component (slot labels, the tab's title) follow the locale too.
      let bound = null
      guard('locale', () => { bound = ctx.locale.bind?.(NS) ?? null })
      const say = (k) => words(bound)(k)

      const fetcher = (url, init) => globalThis.fetch(url, init)
      const stats = createStats(fetcher)
      const restart = createRestart(fetcher)
      let remoteCtx = null
      guard('remote', () => ctx.inject(['remote', 'remote.settings'], (c) => { remoteCtx = c; c.effect?.(() => () => { remoteCtx = null }) }))
      let sidebar = null
      guard('sidebar', () => ctx.inject(['sidebarRight', 'sidebarRightTabs'], (c) => {
        sidebar = c
        // `guide`: the right sidebar's start page lists the Recall tab as one of its doors.
        c.effect(() => c.sidebarRightTabs.register({ id: TAB_ID, kind: TAB_KIND, priority: 'builtin', title: () => say('tab'),
          guide: [{ id: 'recall', order: 60, title: () => say('tab'), description: () => say('tabGuide'),
            ...(renderable(ui.IconContextInjectionOutlineRegular) ? { icon: ui.IconContextInjectionOutlineRegular } : {}) }] }), 'dsh-recall: tab type')
        c.effect(() => () => { sidebar = null })
      }))
      const openTab = (sessionId) => {
        try { sidebar?.sidebarRight?.openTab(TAB_KIND, { params: { sessionId } }) } catch {}
      }

      // The card, while the host serves the entry's namespace.
      guard('card', () => {
        let mirror = null
        try { mirror = ctx.configForms.describe?.() ?? null } catch {}
        const card = createCard(ctx.configForms.get(ENTRY), () => remoteCtx?.remote, mirror)
        ctx.effect(() => () => card.dispose(), 'dsh-recall: card subscription')
        const inject = () => ({ hooks: { recallCard: card.store, recallStats: stats.store, recallRestart: restart.store },
          stats, restartWorker: restart.run, ...card.actions })
        const Wrapped = guarded(Card, 'Card')
        effect('card slots', () => ctx.configForms.whileServed([ENTRY], () => {
          const off = []
          for (const [name, extra] of [['plugins.item', { id: ENTRY, order: 60, label: () => say('title') }],
            ['plugins.bundle.config', { key: PACKAGE }]]) {
            try {
              off.push(ctx.slots.inject(name, () => ctx.slots.register({ name, locale: NS, inject, ...extra }, Wrapped)))
            } catch (e) { failures.push(name) }
          }
          return () => { for (const d of off) { try { typeof d === 'function' && d() } catch {} } }
        }))
      })

      const hooks = () => ({ hooks: { recallStats: stats.store }, stats, openTab })
      slot('conversation.session.header.utilities', { id: 'dsh-recall-chip', order: 40, label: () => say('title'), inject: hooks }, guarded(Chip, 'Chip'))
      slot('sidebar.footer.action', { id: 'dsh-recall-strip', order: 90, label: () => say('title'), inject: hooks }, guarded(Strip, 'Strip'))
      slot('sidebar.right.pane.tab', { key: TAB_ID, inject: hooks }, guarded(Tab, 'Tab'))
      slot('sidebar.right.pane.tab.title', { key: TAB_ID, inject: hooks }, guarded(TabTitle, 'TabTitle'))
      guard('test flag', () => { if (globalThis.localStorage?.getItem('dsh-recall.test.throw') === 'late') throw new Error('dsh-recall test flag: throw late') })
      return failures
    }

    exports.inject = inject
    exports.apply = apply
    // For the unit test (tests/node): pure helpers, no DOM.
    exports._test = { sessionLine, stripLine, healthOf, bytes, booleanField, numberField, createStats, createCard, readRefusal, renderable, en, zh }
    return module.exports
  }
})
