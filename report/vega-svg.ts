// A vega-lite spec rendered to SVG text in Node (vega's headless view, no canvas), so pages and result files
// carry finished pictures that need no script and no network to show.
import * as vega from 'vega'
import * as vl from 'vega-lite'

export async function vegaLiteSvg(spec: object): Promise<string> {
  const view = new vega.View(vega.parse(vl.compile(spec as vl.TopLevelSpec).spec), { renderer: 'none' })
  try {
    return await view.toSVG()
  } finally {
    view.finalize()
  }
}
