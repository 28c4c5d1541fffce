// HTML for the report pages with escaping by construction: the `html` template escapes every interpolated value
// unless it is markup this module made (`Markup`), so text the model wrote (answers, skills, observations) can
// only ever show as text. Pages are self-contained: styles inline, scripts inline, no request leaves the page.

const MARKUP = Symbol('markup')

/** Markup that is already safe: built by `html`, or trusted SVG/script text handed to `trusted`. */
export interface Markup {
  readonly [MARKUP]: string
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] as string)
}

/** Text the caller vouches for (an SVG vega rendered, our own script); never anything a model or user wrote. */
export function trusted(text: string): Markup {
  return { [MARKUP]: text }
}

function isMarkup(value: unknown): value is Markup {
  return typeof value === 'object' && value !== null && MARKUP in value
}

function render(value: unknown): string {
  if (value === null || value === undefined || value === false) return ''
  if (isMarkup(value)) return value[MARKUP]
  if (Array.isArray(value)) return value.map(render).join('')
  return escapeHtml(String(value))
}

/** A template whose interpolations are escaped (arrays joined, null/undefined/false dropped, Markup kept). */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Markup {
  let out = strings[0] as string
  values.forEach((v, i) => {
    out += render(v) + (strings[i + 1] as string)
  })
  return trusted(out)
}

export function markupText(m: Markup): string {
  return m[MARKUP]
}

const STYLE = `
:root { --fg: #1d2430; --muted: #5b6574; --line: #d8dde5; --bg: #ffffff; --panel: #f6f8fa; --accent: #2257a8; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
header.top { padding: 14px 24px; border-bottom: 1px solid var(--line); background: var(--panel); }
header.top h1 { margin: 0 0 4px; font-size: 20px; }
header.top nav a { margin-right: 14px; }
main { padding: 16px 24px 40px; max-width: 1280px; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 15px; margin: 0 0 4px; }
a { color: var(--accent); }
table { border-collapse: collapse; margin: 6px 0 12px; }
th, td { text-align: left; padding: 3px 10px 3px 0; vertical-align: top; border-bottom: 1px solid var(--line); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code, .mono { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 12.5px; }
.muted { color: var(--muted); }
.note { color: var(--muted); font-size: 12.5px; margin: 2px 0 6px; max-width: 760px; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(470px, 1fr)); gap: 18px 24px; }
figure { margin: 0; }
figure svg { max-width: 100%; height: auto; }
figure.empty { color: var(--muted); }
.notice-bad { border: 1px solid #b42318; background: #fef3f2; padding: 8px 12px; border-radius: 4px; margin: 10px 0; }
.notice-bad ul { margin: 6px 0 0; padding-left: 20px; }
.status-ok { color: #1a7f37; } .status-bad { color: #b42318; } .status-live { color: #9a6700; }
details > summary { cursor: pointer; }
pre { white-space: pre-wrap; word-break: break-word; background: var(--panel); padding: 8px; border-radius: 4px; margin: 4px 0; max-height: 420px; overflow: auto; }
`

/** A whole page: title, our stylesheet plus the page's own, the body, and the page's script (ours, inline). */
export function page(options: {
  title: string
  body: Markup
  style?: string
  script?: string
  refreshSeconds?: number
}): string {
  const refresh = options.refreshSeconds ? html`<meta http-equiv="refresh" content="${options.refreshSeconds}">` : ''
  return markupText(html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
${refresh}
<title>${options.title}</title>
<style>${trusted(STYLE + (options.style ?? ''))}</style>
</head>
<body>
${options.body}
${options.script ? html`<script>${trusted(options.script)}</script>` : ''}
</body>
</html>
`)
}
