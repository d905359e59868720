#!/usr/bin/env bash
# Rebuilds the vendored ECharts (public/assets/echarts-<version>-hourglass.min.js) with only what
# the app's charts use: bar and line series, grid, legend (plain and scrolling), tooltip, the canvas
# renderer and the built-in themes. 507 KB (147 KB with brotli) instead of the full build's 1 MB
# (271 KB). Run it by hand when a chart starts using another series or component (the browser
# tests draw every chart); the result is committed, so neither the app's build nor CI needs npm
# for it. Usage: scripts/vendor-echarts.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION=5.6.0
OUT="$ROOT/public/assets/echarts-$VERSION-hourglass.min.js"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
echo '{ "private": true }' >package.json
npm install --no-audit --no-fund --no-package-lock "echarts@$VERSION" esbuild@0.28.2 >/dev/null
cat >entry.js <<'JS'
import * as echarts from 'echarts/core';
import { BarChart, LineChart } from 'echarts/charts';
import {
  GridComponent,
  LegendComponent,
  LegendScrollComponent,
  TooltipComponent,
} from 'echarts/components';
import { CanvasRenderer } from 'echarts/renderers';

echarts.use([
  BarChart,
  LineChart,
  GridComponent,
  LegendComponent,
  LegendScrollComponent,
  TooltipComponent,
  CanvasRenderer,
]);
// charming's wasm renderer calls the global `echarts`, as the full build defines it.
globalThis.echarts = echarts;
JS
npx esbuild entry.js --bundle --minify --format=iife --legal-comments=none \
  --banner:js="/*! Apache ECharts $VERSION and ZRender (Apache-2.0 / BSD-3-Clause), bar and line charts only: built by scripts/vendor-echarts.sh */" \
  --outfile="$OUT"
rm -f "$ROOT"/public/assets/echarts*.js.br "$ROOT"/public/assets/echarts*.js.gz
find "$ROOT/public/assets" -name 'echarts*.js' ! -path "$OUT" -delete
echo "wrote $OUT ($(wc -c <"$OUT") bytes)"
