/* onceflow's charts (audit report, onceflow page in Airflow), drawn with the bundled Chart.js.
 *
 * A page holds its data as JSON in <script type="application/json" id="..."> and one
 * <canvas data-chart="KIND" data-source="ID"> per chart; render(root) draws every canvas
 * under root (again after a refresh). KIND: partitions (committed records vs rows per
 * partition), durations (seconds per batch), rate (input and processed rows/s per batch),
 * lag (offsets behind Kafka's latest after each batch). No network: Chart.js is a file
 * next to this one.
 */
(function () {
  "use strict";
  var COLORS = {blue: "#0969da", green: "#1a7f37", orange: "#bc4c00", purple: "#8250df", grey: "#6e7781",
                red: "#cf222e"};

  function label(point) {  // "11-24 03:24:31" (UTC, from the status log's ISO time)
    return point.time ? point.time.slice(5, 19).replace("T", " ") : "batch " + point.batch;
  }

  function line(name, values, color) {
    return {label: name, data: values, borderColor: color, backgroundColor: color, pointRadius: 2,
            borderWidth: 1.5, spanGaps: true, tension: 0};
  }

  var BUILD = {
    partitions: function (d) {
      var parts = d.partitions || [];
      if (!parts.length) return null;
      return {type: "bar", data: {
        labels: parts.map(function (p) { return "partition " + p.partition; }),
        datasets: [
          {label: "committed records (Kafka)", data: parts.map(function (p) { return p.source_records; }),
           backgroundColor: COLORS.blue},
          {label: "bronze rows", data: parts.map(function (p) { return p.bronze_rows; }), backgroundColor: COLORS.green},
          {label: "quarantine rows", data: parts.map(function (p) { return p.quarantine_rows; }),
           backgroundColor: COLORS.orange}]},
        options: {scales: {y: {beginAtZero: true, title: {display: true, text: "records / rows"}}}}};
    },
    durations: function (d) {
      var b = d.batches || [];
      if (!b.length) return null;
      return {type: "bar", data: {labels: b.map(label), datasets: [
        {label: "batch duration (s)", data: b.map(function (p) { return p.seconds; }), backgroundColor: COLORS.purple}]},
        options: {scales: {y: {beginAtZero: true, title: {display: true, text: "seconds"}}}}};
    },
    rate: function (d) {
      var b = d.batches || [];
      if (!b.length) return null;
      return {type: "line", data: {labels: b.map(label), datasets: [
        line("input rows/s", b.map(function (p) { return p.input_rate; }), COLORS.blue),
        line("processed rows/s", b.map(function (p) { return p.processed_rate; }), COLORS.green)]},
        options: {scales: {y: {beginAtZero: true, title: {display: true, text: "rows per second"}}}}};
    },
    lag: function (d) {
      var b = d.batches || [];
      if (!b.length) return null;
      return {type: "line", data: {labels: b.map(label), datasets: [
        line("lag (offsets)", b.map(function (p) { return p.lag; }), COLORS.red)]},
        options: {scales: {y: {beginAtZero: true, title: {display: true, text: "offsets"}}}}};
    }
  };

  function data(id) {
    var el = document.getElementById(id);
    return el ? JSON.parse(el.textContent || "{}") : {};
  }

  function render(root) {
    root = root || document;
    var canvases = root.querySelectorAll("canvas[data-chart]");
    for (var i = 0; i < canvases.length; i++) {
      var canvas = canvases[i], build = BUILD[canvas.getAttribute("data-chart")];
      var existing = window.Chart.getChart(canvas);
      if (existing) existing.destroy();
      var config = build && build(data(canvas.getAttribute("data-source")));
      if (!config) {  // nothing to draw: say so instead of an empty box
        var note = document.createElement("p");
        note.className = "muted no-data";
        note.textContent = canvas.getAttribute("data-empty") || "no data yet";
        canvas.replaceWith(note);
        continue;
      }
      config.options = Object.assign({animation: false, responsive: true, maintainAspectRatio: false,
                                      plugins: {legend: {position: "bottom"}}}, config.options);
      new window.Chart(canvas, config);
    }
  }

  window.onceflowCharts = {render: render};
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () { render(document); });
  } else {
    render(document);
  }
})();
