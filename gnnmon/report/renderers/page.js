// gnnmon's report page: draws the run's data (the JSON in #gnnmon-data) as SVG, with no library.
// Timeline: rows, phases, GC pauses and markers per rank and track, sampled counters under them;
// wheel to zoom, drag to pan, double-click to reset, hover for a slice's figures.
// Memory: each label's peak per call, with the memory model's forecast where it is trusted.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("gnnmon-data").textContent);
  var NS = "http://www.w3.org/2000/svg";
  var LANE = 18, GAP = 6, LEFT = 150, COUNTER_H = 70;
  var COLORS = {row: "#4c78a8", phase: "#72b7b2", gc: "#e45756", sample: "#54a24b"};
  var tip = document.getElementById("tip");

  function el(name, attrs, parent) {
    var node = document.createElementNS(NS, name);
    Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (parent) { parent.appendChild(node); }
    return node;
  }

  function fmtMs(us) { return (us / 1000).toFixed(us < 10000 ? 3 : 1) + " ms"; }

  // an axis label: the number as people write it, with the unit the track or chart is in
  function fmtAxis(v, unit) {
    var digits = v >= 100 ? 0 : v >= 10 ? 1 : 2;
    return v.toLocaleString("en-US", {maximumFractionDigits: digits}) + (unit ? " " + unit : "");
  }

  // The tip is built of text nodes: every name and value in it is the run's data, never markup.
  function showTip(evt, parts) {
    tip.textContent = "";
    parts.forEach(function (part) {
      if (part === "\n") { tip.appendChild(document.createElement("br")); return; }
      if (typeof part === "object") {
        var b = document.createElement("b");
        b.textContent = part.bold;
        tip.appendChild(b);
        return;
      }
      tip.appendChild(document.createTextNode(part));
    });
    tip.style.display = "block";
    tip.style.left = (evt.pageX + 12) + "px";
    tip.style.top = (evt.pageY + 12) + "px";
  }

  function hideTip() { tip.style.display = "none"; }

  function argsParts(args) {
    var out = [];
    Object.keys(args || {}).forEach(function (k) { out.push("\n", k + ": " + JSON.stringify(args[k])); });
    return out;
  }

  // -- the timeline ----------------------------------------------------------------------
  function timeline() {
    var host = document.getElementById("timeline");
    var events = data.trace.traceEvents;
    // maps keyed by the run's own names: no prototype, so that no name ("__proto__", "constructor") is special
    var names = Object.create(null), tracks = [], trackIndex = Object.create(null), counters = Object.create(null);
    var slices = [], markers = [];
    var t0 = Infinity, t1 = -Infinity;
    events.forEach(function (e) {
      if (e.ph === "M") {
        if (e.name === "thread_name") { names[e.pid + ":" + e.tid] = e.args.name; }
        return;
      }
      var end = e.ts + (e.dur || 0);
      t0 = Math.min(t0, e.ts); t1 = Math.max(t1, end);
      if (e.ph === "X") {
        var key = e.pid + ":" + e.tid;
        if (!(key in trackIndex)) { trackIndex[key] = true; tracks.push({pid: e.pid, tid: e.tid, key: key}); }
        slices.push(e);
      } else if (e.ph === "C") {
        var ckey = e.pid + ":" + e.name;
        (counters[ckey] = counters[ckey] || {pid: e.pid, name: e.name, points: []}).points.push(e);
      } else if (e.ph === "i") {
        markers.push(e);
      }
    });
    if (!isFinite(t0)) { host.textContent = "No timed rows, pauses or samples in this run."; return; }
    if (t1 <= t0) { t1 = t0 + 1; }
    tracks.sort(function (a, b) { return a.pid - b.pid || a.tid - b.tid; });
    var multi = data.ranks > 1;
    var y = 0, laneOf = Object.create(null);
    tracks.forEach(function (t) { laneOf[t.key] = y; y += LANE + 2; });
    var counterList = Object.keys(counters).sort().map(function (k) { return counters[k]; });
    var height = y + GAP + counterList.length * (COUNTER_H + GAP) + 20;
    var width = Math.max(host.clientWidth, 600);
    var svg = el("svg", {width: width, height: height, "class": "timeline"}, host);
    var plot = width - LEFT - 10;
    var view = {a: t0, b: t1};
    tracks.forEach(function (t) {
      var name = names[t.key] || "track " + t.tid;
      var label = multi ? "rank " + t.pid + " " + name.split(" (")[0] : name;
      el("text", {x: 4, y: laneOf[t.key] + 13, "class": "lane"}, svg).textContent = label;
    });
    var clip = el("clipPath", {id: "plot-clip"}, el("defs", {}, svg));
    el("rect", {x: LEFT, y: 0, width: plot, height: height}, clip);
    var layer = el("g", {"clip-path": "url(#plot-clip)"}, svg);
    var rects = slices.map(function (e) {
      var r = el("rect", {y: laneOf[e.pid + ":" + e.tid], height: LANE, fill: COLORS[e.cat] || "#999",
                          "class": e.cat + "-mark"}, layer);
      r.addEventListener("mousemove", function (evt) {
        showTip(evt, [{bold: String(e.name)}, " " + fmtMs(e.dur || 0)].concat(argsParts(e.args)));
      });
      r.addEventListener("mouseleave", hideTip);
      return [r, e];
    });
    var marks = markers.map(function (e) {
      var line = el("line", {y1: 0, y2: y, "class": "marker-mark"}, layer);
      line.addEventListener("mousemove", function (evt) { showTip(evt, [String(e.name)]); });
      line.addEventListener("mouseleave", hideTip);
      return [line, e];
    });
    var charts = counterList.map(function (c, i) {
      var top = y + GAP + i * (COUNTER_H + GAP);
      el("text", {x: 4, y: top + 13, "class": "lane"}, svg).textContent = (multi ? "rank " + c.pid + " " : "") + c.name;
      el("rect", {x: LEFT, y: top, width: plot, height: COUNTER_H, "class": "counter-box"}, svg);
      var series = Object.create(null);
      c.points.forEach(function (p) {
        Object.keys(p.args).forEach(function (k) { (series[k] = series[k] || []).push([p.ts, p.args[k]]); });
      });
      var max = 0;
      Object.keys(series).forEach(function (k) { series[k].forEach(function (p) { max = Math.max(max, p[1]); }); });
      max = max || 1;
      var unit = c.name.split(" ").pop();  // "memory MiB" -> MiB, "utilisation %" -> %
      el("text", {x: LEFT - 4, y: top + 10, "class": "axis", "text-anchor": "end"}, svg).textContent = fmtAxis(max, unit);
      el("text", {x: LEFT - 4, y: top + COUNTER_H, "class": "axis", "text-anchor": "end"}, svg).textContent = fmtAxis(0, unit);
      var palette = ["#54a24b", "#f58518", "#b279a2", "#9d755d"];
      var lines = Object.keys(series).map(function (k, j) {
        el("text", {x: LEFT + 6 + j * 170, y: top + 12, "class": "legend", fill: palette[j % 4]}, svg).textContent = k;
        var line = el("polyline", {"class": "counter-line", stroke: palette[j % 4]}, layer);
        line.addEventListener("mousemove", function (evt) { showTip(evt, [k]); });
        line.addEventListener("mouseleave", hideTip);
        return [line, series[k]];
      });
      return {top: top, max: max, lines: lines};
    });
    var axis = el("text", {x: LEFT, y: height - 4, "class": "axis"}, svg);

    function x(ts) { return LEFT + (ts - view.a) / (view.b - view.a) * plot; }

    function draw() {
      rects.forEach(function (pair) {
        var e = pair[1], left = x(e.ts), right = x(e.ts + (e.dur || 0));
        pair[0].setAttribute("x", left);
        pair[0].setAttribute("width", Math.max(right - left, 0.5));
      });
      marks.forEach(function (pair) { var px = x(pair[1].ts); pair[0].setAttribute("x1", px); pair[0].setAttribute("x2", px); });
      charts.forEach(function (chart) {
        chart.lines.forEach(function (pair) {
          pair[0].setAttribute("points", pair[1].map(function (p) {
            return x(p[0]).toFixed(1) + "," + (chart.top + COUNTER_H - p[1] / chart.max * (COUNTER_H - 4)).toFixed(1);
          }).join(" "));
        });
      });
      axis.textContent = fmtMs(view.a - t0) + " to " + fmtMs(view.b - t0) + " from the first event · wheel: zoom, " +
        "drag: pan, double-click: reset";
    }

    var pending = false;
    function redraw() { if (!pending) { pending = true; requestAnimationFrame(function () { pending = false; draw(); }); } }
    svg.addEventListener("wheel", function (evt) {
      evt.preventDefault();
      var at = view.a + (evt.offsetX - LEFT) / plot * (view.b - view.a);
      var k = evt.deltaY > 0 ? 1.25 : 0.8;
      view.a = at - (at - view.a) * k; view.b = at + (view.b - at) * k;
      redraw();
    }, {passive: false});
    var drag = null;
    svg.addEventListener("mousedown", function (evt) { drag = {x: evt.clientX, a: view.a, b: view.b}; });
    window.addEventListener("mouseup", function () { drag = null; });
    window.addEventListener("mousemove", function (evt) {
      if (!drag) { return; }
      var shift = (evt.clientX - drag.x) / plot * (drag.b - drag.a);
      view.a = drag.a - shift; view.b = drag.b - shift;
      redraw();
    });
    svg.addEventListener("dblclick", function () { view.a = t0; view.b = t1; redraw(); });
    draw();
  }

  // -- memory per call -------------------------------------------------------------------
  function memory() {
    var host = document.getElementById("memory");
    var labels = Object.keys(data.memory);
    if (!labels.length) { host.textContent = "No memory figures in this run."; return; }
    labels.forEach(function (label) {
      var m = data.memory[label];
      var box = document.createElement("div");
      box.className = "chart";
      host.appendChild(box);
      var title = document.createElement("h4");
      title.textContent = label + " — " + m.figure + " (MiB) per call" + (m.forecast ? "; dashed: the memory model's forecast"
        : "; no forecast line (" + (m.no_forecast || "no model") + ")");
      box.appendChild(title);
      var width = Math.max(host.clientWidth, 600), height = 160, plot = width - LEFT - 10;
      var svg = el("svg", {width: width, height: height, "class": "memory"}, box);
      var values = m.values.concat(m.forecast || []).filter(function (v) { return v !== null; });
      // from 0: a peak is an amount, and a 3 % variation drawn across the whole height misleads
      var lo = 0, hi = Math.max.apply(null, values);
      if (hi <= lo) { hi = lo + 1; }
      var n = m.index.length, first = m.index[0], last = m.index[n - 1] === first ? first + 1 : m.index[n - 1];
      function px(i) { return LEFT + (i - first) / (last - first) * plot; }
      function py(v) { return height - 18 - (v - lo) / (hi - lo) * (height - 30); }
      function points(vs) {
        var out = [];
        vs.forEach(function (v, j) { if (v !== null) { out.push(px(m.index[j]).toFixed(1) + "," + py(v).toFixed(1)); } });
        return out.join(" ");
      }
      el("text", {x: LEFT - 4, y: 12, "class": "axis", "text-anchor": "end"}, svg).textContent = fmtAxis(hi, "MiB");
      el("text", {x: LEFT - 4, y: height - 18, "class": "axis", "text-anchor": "end"}, svg).textContent = fmtAxis(lo, "MiB");
      el("text", {x: LEFT, y: height - 2, "class": "axis"}, svg).textContent = "call " + first + " to " + m.index[n - 1];
      el("polyline", {points: points(m.values), "class": "memory-line"}, svg);
      if (m.forecast) { el("polyline", {points: points(m.forecast), "class": "forecast-line"}, svg); }
      svg.addEventListener("mousemove", function (evt) {
        var at = first + (evt.offsetX - LEFT) / plot * (last - first), j = 0;
        for (var i = 1; i < n; i++) { if (Math.abs(m.index[i] - at) < Math.abs(m.index[j] - at)) { j = i; } }
        var text = label + " call " + m.index[j] + ": " + (m.values[j] === null ? "–" : m.values[j].toFixed(2) + " MiB");
        if (m.forecast && m.forecast[j] !== null) { text += "; forecast " + m.forecast[j].toFixed(2) + " MiB"; }
        showTip(evt, [text]);
      });
      svg.addEventListener("mouseleave", hideTip);
    });
  }

  timeline();
  memory();
  document.body.setAttribute("data-ready", "1");
})();
