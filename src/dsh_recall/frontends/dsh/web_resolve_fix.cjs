'use strict'
// Work-around for a packaging bug of deepseek-harness-runtime-bin 0.2.1rc2: its web profile's
// workspace controller imports '@deepseek-ai/dsh-host-directory-picker', which the binary
// ships only nested under the -browse and -native pickers, so the web UI shows "Failed to
// load plugins". Preload it with NODE_OPTIONS=--require=<this file>: when that one bare
// specifier fails to resolve, it is pointed at the copy the browse picker uses (the same
// file the picker itself loads, so class identity holds). Everything else resolves as
// before. Node < 24 (a system node a dsh child may run) skips it; so does a fixed runtime.
const mod = require('node:module')
const fs = require('node:fs')
const { pathToFileURL, fileURLToPath } = require('node:url')

const SPEC = '@deepseek-ai/dsh-host-directory-picker'
const major = Number(String(process.versions.node).split('.')[0])

function nestedCopy (parentURL) {
  let parent
  try { parent = fileURLToPath(parentURL) } catch { return null }
  const marker = '/node_modules/@deepseek-ai/dsh/node_modules/'
  const at = parent.indexOf(marker)
  if (at < 0) return null
  const scope = parent.slice(0, at + marker.length) + '@deepseek-ai/'
  for (const picker of ['dsh-host-directory-picker-browse', 'dsh-host-directory-picker-native']) {
    const dir = `${scope}${picker}/node_modules/@deepseek-ai/dsh-host-directory-picker`
    try {
      const pkg = JSON.parse(fs.readFileSync(`${dir}/package.json`, 'utf8'))
      if (pkg.name !== SPEC) continue
      const entry = pkg.exports?.['.']?.default ?? pkg.main ?? 'lib/index.js'
      const file = `${dir}/${String(entry).replace(/^\.\//, '')}`
      if (fs.existsSync(file)) return pathToFileURL(file).href
    } catch {}
  }
  return null
}

if (major >= 24 && typeof mod.registerHooks === 'function') {
  mod.registerHooks({
    resolve (specifier, context, nextResolve) {
      if (specifier !== SPEC) return nextResolve(specifier, context)
      try {
        return nextResolve(specifier, context)
      } catch (error) {
        const url = nestedCopy(String(context.parentURL || ''))
        if (url === null) throw error
        return { url, format: 'module', shortCircuit: true }
      }
    }
  })
}
