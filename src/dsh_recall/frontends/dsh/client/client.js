// dsh-recall, browser half: what the native plugin does, shown in dsh's web UI (0.2.1rc2).
//
// Hand-written in the runtime's bundle format (a lazy factory registered with
// window.__ModuleLoader__; no build step). It registers, each on its own and guarded so a
// failure here never takes the page down:
//   plugins.item / plugins.bundle.config   the settings card over the `recall-native`
//                                          entry's volatile Config fields (configForms)
//   conversation.session.header.utilities  "Recall N · R× · S kept out" for this session
//   sidebar.right.pane.tab (+ .title)      the Recall tab: the same figures, what they are not
//   shell.overlay                          the strip: totals, health, "Recalling…"
// Figures come from GET api/dsh-recall/stats (the host half's route, behind the runtime's own
// browser auth): counts only, never a path or a recalled text.
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
    const POLL_MS = 1500
    const DONE_MS = 4000

    const en = {
      title: 'Recall',
      description: 'Offload, auto-recall and anchors for long sessions.',
      reaper: 'Offload big tool results',
      reads: 'Shorten whole-file reads to head + outline',
      autoRecall: 'Auto-recall history, notes and anchors',
      reclaim: 'Reclaim results already seen',
      minChars: 'Smallest result sent to the worker (chars)',
      callTimeoutMs: 'Worker call deadline (ms)',
      startTimeoutMs: 'Worker start deadline (ms)',
      hangMs: 'Stop a worker silent this long (ms)',
      embedderApiKey: 'Embedding endpoint key',
      embedderApiKeyHint: 'Write-only: never sent back to this page. Used from the next worker start.',
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
      invalidNumber: 'Enter a number, or leave blank to use the default.',
      recalling: 'Recalling…',
      complete: 'Recall complete',
      tab: 'Recall',
      kept: 'kept out',
      offloads: 'offloads',
      hits: 'hits',
      onDisk: 'on disk',
      notes: 'Offloads and the ratio count this conversation in this dsh process. "Kept out" is an estimate: characters of tool output the model did not have to read again, at about 4 per token, an upper bound when the model recalled parts back. Totals and disk use are for the whole recall home.',
      healthReady: 'running',
      healthDegraded: 'degraded'
    }

    const HEALTH_REASON = {
      new: 'not started yet',
      starting: 'the worker has not printed its ready line',
      slow: 'a worker call took over its deadline',
      hung: 'the worker stopped answering',
      dead: 'the worker exited; the next request restarts it',
      disabled: 'the worker gave up for this dsh process',
      absent: 'the host half is not loaded in this profile'
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

    function bytes (n) {
      if (!Number.isFinite(n) || n < 0) return '0 B'
      if (n < 1000) return `${Math.round(n)} B`
      if (n < 1e6) return `${(n / 1000).toFixed(n < 1e4 ? 1 : 0)} KB`
      if (n < 1e9) return `${(n / 1e6).toFixed(1)} MB`
      return `${(n / 1e9).toFixed(1)} GB`
    }
    const int = (v) => (Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0)
    const ratio = (a, b) => (b > 0 && a > b ? Math.round(a / b) : 0)

    // The figures one session shows (chip and tab), or null when there is nothing to say.
    function sessionLine (s) {
      if (!s || int(s.offloads) === 0) return null
      const r = ratio(int(s.charsIn), int(s.charsInline))
      return `Recall ${int(s.offloads)}${r ? ` · ${r}×` : ''} · ${bytes(int(s.keptChars))} kept out`
    }

    // The recall home's totals, as MCP `status` reports them (the same worker answer).
    function count (n, one, many) {
      return `${n.toLocaleString('en-US')} ${n === 1 ? one : many}`
    }

    function stripLine (st) {
      const o = st.objects || {}
      return `${count(int(o.offloaded), 'offload', 'offloads')} · ` +
        `${count(int(o.tokens_kept_out), 'token', 'tokens')} kept out · ` +
        `${count(int(o.recalls), 'hit', 'hits')} · ${bytes(int(o.disk_bytes))} on disk`
    }

    function healthOf (st) {
      const state = typeof st.health === 'string' ? st.health : 'absent'
      if (state === 'ready') return { ok: true, label: en.healthReady, reason: '' }
      return { ok: false, label: en.healthDegraded, reason: HEALTH_REASON[state] || 'unknown state' }
    }

    // One poller for every mounted surface: started by the first subscriber. The runtime
    // gives a plugin's browser half no push channel (its remote events are a fixed list of
    // the runtime's own), so the host half's `recalling` stays on for a short window after a
    // call starts, longer than one poll: every call shows its sweep for at least one poll.
    function createStats (fetcher) {
      const store = createStore({ loaded: false, ok: false, health: 'absent', objects: {}, sessions: {},
        busy: 0, lastDoneAt: 0, complete: false })
      let timer = null
      let users = 0
      let seenDone = null
      let wasBusy = false
      const tick = async () => {
        let next
        try {
          const res = await fetcher(STATS, { credentials: 'same-origin', cache: 'no-store' })
          next = res.ok ? await res.json() : null
        } catch { next = null }
        const prev = store.getSnapshot()
        if (!next || typeof next !== 'object') {
          store.set({ ...prev, loaded: true, ok: false })
        } else {
          const done = int(next.lastDoneAt)
          // A host half without `recalling` (older) says only how many calls run now.
          const busy = (typeof next.recalling === 'boolean' ? next.recalling : int(next.busy) > 0)
            ? Math.max(1, int(next.busy)) : 0
          // "Recall complete" once after a sweep (or a call that finished between two polls),
          // for a few seconds, never on first load.
          const complete = busy === 0 && seenDone !== null && (wasBusy || done > seenDone)
          if (seenDone === null || done > seenDone) seenDone = done
          wasBusy = busy > 0
          store.set({ loaded: true, ok: true, health: next.health, objects: next.objects || {},
            sessions: next.sessions || {}, busy, lastDoneAt: done,
            complete: complete || (prev.complete && Date.now() - prev.completeAt < DONE_MS),
            completeAt: complete ? Date.now() : prev.completeAt })
        }
        if (users > 0) timer = setTimeout(tick, POLL_MS)
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
      React.useEffect(() => stats.acquire(), [])
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

    // The card's state over the settings scope: SettingsFormModel when the runtime has it,
    // and the runtime's own reason when it refuses a save.
    function createCard (scope, remote, mirror) {
      const refusal = createStore({ message: '' })
      // A refused write: the same ops are asked once more through the settings remote, for
      // the runtime's reason (the form controller answers only true / false).
      const explain = async (ops) => {
        let message = 'The runtime did not accept these values.'
        try {
          const r = await remote()?.settings?.mutate?.(ENTRY, ops, scope.getSnapshot().revision)
          if (r && r.ok === false && r.error?.message) message = String(r.error.message).slice(0, 400)
          else if (r && r.ok) return true
        } catch {}
        refusal.set({ message })
        return false
      }
      // Writes go through the form controller (it refreshes the mirror).
      const explained = {
        getSnapshot: () => scope.getSnapshot(),
        subscribe: (fn) => scope.subscribe(fn),
        set: (f, v) => scope.set(f, v),
        unset: (f) => scope.unset(f),
        mutate: async (ops, revision) => {
          refusal.set({ message: '' })
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
      const form = typeof ui.SettingsFormModel === 'function' ? new ui.SettingsFormModel(explained, specs, secrets) : null
      const project = () => {
        const snap = scope.getSnapshot() || {}
        const shell = form ? form.shell() : { available: snap.status === 'ready', writable: !!snap.writable, dirty: false, invalid: false, saving: false, failed: false }
        const fields = {}
        for (const s of specs) fields[s.field] = form ? form.field(s.field) : { text: s.format(snap.value?.[s.field]), overridden: false, invalid: false }
        fields[SECRET] = form ? form.field(SECRET) : { text: '' }
        return { ...shell, fields, refusal: refusal.getSnapshot().message, secretSet: secretSetIn(mirror) }
      }
      const store = form ? form.bind(project) : createStore(project())
      refusal.subscribe(() => store.set(project()))
      if (!form) scope.subscribe(() => store.set(project()))
      const offMirror = typeof mirror?.subscribe === 'function' ? mirror.subscribe(() => store.set(project())) : null
      const actions = form ? form.actions() : { edit: () => {}, resetField: () => {}, save: () => {}, discard: () => {} }
      return { store, actions, dispose: () => { form?.dispose(); try { offMirror?.() } catch {} } }
    }

    function Card (props) {
      const t = (k) => en[k] ?? k
      const state = props.useRecallCard((s) => s)
      if (props.view === 'summary') return t('description')
      if (!state.available) return h('p', { role: 'status', 'data-dsh-recall': 'unavailable' }, t('unavailable'))
      const disabled = !state.writable || state.saving
      const rows = []
      for (const f of BOOLEAN) {
        const field = state.fields[f]
        const checked = field.text === 'true'
        const onChange = (next) => props.edit(f, next ? 'true' : 'false')
        rows.push(h('div', { key: f, 'data-field': f, style: { display: 'flex', alignItems: 'center', gap: 12, margin: '10px 0' } },
          typeof ui.Switch === 'function'
            ? h(ui.Switch, { checked, onChange, label: t(f), disabled })
            : h('input', { type: 'checkbox', checked, disabled, onChange: (e) => onChange(e.target.checked), 'aria-label': t(f) }),
          h('span', null, t(f))))
      }
      for (const f of NUMBER) {
        const field = state.fields[f]
        const common = { id: `dsh-recall-${f}`, label: t(f), overriddenLabel: t('overridden'), resetLabel: t('reset'),
          invalidLabel: t('invalidNumber'), numeric: true, disabled, ...field,
          onEdit: (text) => props.edit(f, text), onReset: () => props.resetField(f) }
        rows.push(h('div', { key: f, 'data-field': f },
          typeof ui.SettingsValueField === 'function'
            ? h(ui.SettingsValueField, common)
            : h('label', null, t(f), ' ', h('input', { id: common.id, value: field.text, disabled, onChange: (e) => props.edit(f, e.target.value) }))))
      }
      const secret = state.fields[SECRET]
      const secretProps = { id: 'dsh-recall-embedderApiKey', label: t('embedderApiKey'), hint: t('embedderApiKeyHint'),
        stateLabel: state.secretSet ? t('secretSet') : t('secretUnset'), configured: state.secretSet, text: secret.text,
        disabled, onEdit: (text) => props.edit(SECRET, text) }
      rows.push(h('div', { key: SECRET, 'data-field': SECRET, 'data-secret-set': String(!!state.secretSet) },
        typeof ui.SettingsSecretField === 'function'
          ? h(ui.SettingsSecretField, secretProps)
          : h('label', null, t('embedderApiKey'), ' ', h('span', { 'data-part': 'secret-state' }, secretProps.stateLabel), ' ',
            h('input', { id: secretProps.id, type: 'password', value: secret.text, disabled, onChange: (e) => props.edit(SECRET, e.target.value) }))))
      const labels = { unavailable: t('unavailable'), readOnly: t('readOnly'), saveFailed: state.refusal || t('saveFailed'), save: t('save'), saving: t('saving') }
      const note = h('p', { key: 'live', style: { color: 'var(--dsw-alias-text-secondary, inherit)', margin: '4px 0 8px' } }, t('live'))
      const refusal = state.failed ? h('p', { key: 'refusal', role: 'alert', 'data-dsh-recall': 'refusal' }, state.refusal || t('saveFailed')) : null
      const body = [note, ...rows, refusal]
      if (typeof ui.SettingsForm === 'function') {
        return h('div', { 'data-dsh-recall': 'card' }, h(ui.SettingsForm, { labels, state, onSave: props.save, onDiscard: props.discard, children: body }))
      }
      return h('div', { 'data-dsh-recall': 'card' }, ...body,
        h('button', { type: 'button', disabled: !state.dirty || state.invalid || disabled, onClick: props.save }, state.saving ? t('saving') : t('save')))
    }

    // -- chip, tab, strip -----------------------------------------------------------------
    function Chip (props) {
      testThrow('render')
      useAcquire(props.stats)
      const s = props.useRecallStats((st) => st.sessions?.[props.sessionId])
      const busy = props.useRecallStats((st) => st.busy > 0)
      const line = sessionLine(s)
      if (!line) return null
      const label = busy && typeof ui.TextShimmer === 'function' ? h(ui.TextShimmer, { active: true }, line) : line
      return h('button', {
        type: 'button',
        'data-dsh-recall': 'chip',
        'data-offloads': int(s.offloads),
        'data-kept-chars': int(s.keptChars),
        title: en.notes,
        onClick: () => props.openTab?.(props.sessionId),
        style: { font: 'inherit', fontSize: 12, padding: '2px 8px', borderRadius: 999, cursor: 'pointer',
          border: '1px solid var(--dsw-alias-border-default, rgba(0,0,0,.15))', background: 'transparent', color: 'inherit' }
      }, label)
    }

    function Tab (props) {
      useAcquire(props.stats)
      const s = props.useRecallStats((st) => st.sessions?.[props.sessionId])
      const st = props.useRecallStats((x) => x)
      const health = healthOf(st)
      const rows = [
        ['Offloads in this conversation', String(int(s?.offloads))],
        ['Characters in / shown', `${int(s?.charsIn).toLocaleString()} / ${int(s?.charsInline).toLocaleString()}`],
        ['Kept out (estimate)', bytes(int(s?.keptChars))],
        ['Offloads, all sessions', String(int(st.objects?.offloaded))],
        ['Recall hits', String(int(st.objects?.recalls))],
        ['On disk', bytes(int(st.objects?.disk_bytes))],
        ['Worker', health.ok ? health.label : `${health.label}: ${health.reason}`]
      ]
      return h('div', { 'data-dsh-recall': 'tab', style: { padding: 16, fontSize: 13 } },
        h('table', null, h('tbody', null, ...rows.map(([k, v]) => h('tr', { key: k }, h('th', { style: { textAlign: 'left', paddingRight: 16, fontWeight: 'normal' } }, k), h('td', null, v))))),
        h('p', { style: { marginTop: 12 } }, en.notes))
    }

    function TabTitle () { return en.tab }

    function Strip (props) {
      testThrow('render')
      useAcquire(props.stats)
      const st = props.useRecallStats((x) => x)
      if (!st.loaded || !st.ok) return null
      const health = healthOf(st)
      const o = st.objects || {}
      let activity = null
      if (st.busy > 0) {
        activity = typeof ui.TextShimmer === 'function' ? h(ui.TextShimmer, { active: true }, en.recalling) : en.recalling
      } else if (st.complete) {
        activity = en.complete
      }
      return h('div', {
        'data-dsh-recall': 'strip',
        'data-health': health.ok ? 'running' : 'degraded',
        'data-offloads': int(o.offloaded),
        'data-tokens-kept-out': int(o.tokens_kept_out),
        'data-recalls': int(o.recalls),
        'data-disk-bytes': int(o.disk_bytes),
        // Bottom of the left sidebar, above its "More" row: over no composer, footer or message
        // (bottom-centre covered the composer's token footer, bottom-right its model picker).
        style: { position: 'fixed', left: 14, bottom: 48, maxWidth: 252, boxSizing: 'border-box', pointerEvents: 'auto', fontSize: 11,
          lineHeight: '16px', padding: '4px 10px', borderRadius: 10, background: 'var(--dsw-alias-bg-elevated, rgba(255,255,255,.92))',
          border: '1px solid var(--dsw-alias-border-default, rgba(0,0,0,.12))', color: 'var(--dsw-alias-text-secondary, #555)' }
      },
      h('span', { 'data-part': 'figures' }, stripLine(st)),
      ' · ',
      h('span', { 'data-part': 'health', title: health.reason || undefined }, health.ok ? health.label : `${health.label}: ${health.reason}`),
      activity ? h('span', { 'data-part': 'activity' }, ' · ', activity) : null)
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
      effect('dictionaries', () => ctx.locale.register(NS, { en, zh: en }))

      const stats = createStats((url, init) => globalThis.fetch(url, init))
      let remoteCtx = null
      guard('remote', () => ctx.inject(['remote', 'remote.settings'], (c) => { remoteCtx = c; c.effect?.(() => () => { remoteCtx = null }) }))
      let sidebar = null
      guard('sidebar', () => ctx.inject(['sidebarRight', 'sidebarRightTabs'], (c) => {
        sidebar = c
        c.effect(() => c.sidebarRightTabs.register({ id: TAB_ID, kind: TAB_KIND, priority: 'builtin', title: () => en.tab }), 'dsh-recall: tab type')
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
        const inject = () => ({ hooks: { recallCard: card.store }, ...card.actions })
        const Wrapped = guarded(Card, 'Card')
        effect('card slots', () => ctx.configForms.whileServed([ENTRY], () => {
          const off = []
          for (const [name, extra] of [['plugins.item', { id: ENTRY, order: 60, label: () => en.title }],
            ['plugins.bundle.config', { key: PACKAGE }]]) {
            try {
              off.push(ctx.slots.inject(name, () => ctx.slots.register({ name, locale: NS, inject, ...extra }, Wrapped)))
            } catch (e) { failures.push(name) }
          }
          return () => { for (const d of off) { try { typeof d === 'function' && d() } catch {} } }
        }))
      })

      const hooks = () => ({ hooks: { recallStats: stats.store }, stats, openTab })
      slot('conversation.session.header.utilities', { id: 'dsh-recall-chip', order: 40, label: () => en.title, inject: hooks }, guarded(Chip, 'Chip'))
      slot('shell.overlay', { id: 'dsh-recall-strip', order: 90, inject: hooks }, guarded(Strip, 'Strip'))
      slot('sidebar.right.pane.tab', { key: TAB_ID, inject: hooks }, guarded(Tab, 'Tab'))
      slot('sidebar.right.pane.tab.title', { key: TAB_ID, inject: hooks }, guarded(TabTitle, 'TabTitle'))
      guard('test flag', () => { if (globalThis.localStorage?.getItem('dsh-recall.test.throw') === 'late') throw new Error('dsh-recall test flag: throw late') })
      return failures
    }

    exports.inject = inject
    exports.apply = apply
    // For the unit test (tests/node): pure helpers, no DOM.
    exports._test = { sessionLine, stripLine, healthOf, bytes, booleanField, numberField, createStats, createCard }
    return module.exports
  }
})
