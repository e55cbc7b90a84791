// Roads: how the table display draws the five roads of a roads payload
// (coup/roads: bead plate, big road, big eye boy, small road, cockroach
// pig). The table display (app.js) and the surveillance viewer both draw
// with it, so the two cannot differ. Everything goes in as text.
'use strict';

window.tableRoads = (function () {
  const ROWS = 6;
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function num(v) { return typeof v === 'number' && isFinite(v) ? v : 0; }

  // drawRoad lays cells out on a road's grid, showing its last columns when
  // the shoe has more than the screen holds.
  function drawRoad(box, cells, make) {
    // Fractional sizes: clientWidth and clientHeight are rounded, which
    // can lose a whole column of cells sized to a fraction of a pixel.
    const cs = getComputedStyle(box);
    const b = box.getBoundingClientRect();
    const inner = (w, a, z) => w - parseFloat(cs[a]) - parseFloat(cs[z]);
    const cell = inner(b.height, 'borderTopWidth', 'borderBottomWidth') / ROWS;
    // Whole columns only: a column that only partly fits is cut off at
    // the edge, the newest one included.
    const capacity = Math.max(1, Math.floor(inner(b.width, 'borderLeftWidth', 'borderRightWidth') / cell + 0.001));
    let last = -1;
    for (const c of cells) if (c.col > last) last = c.col;
    // As casino boards do, the board scrolls to keep the newest column in
    // view with an empty column after it for the next result (unless the
    // board is a single column wide).
    const spare = capacity > 2 ? 1 : 0;
    const offset = Math.max(0, last + 1 + spare - capacity);
    box.dataset.capacity = String(capacity);
    box.dataset.offset = String(offset);
    const frag = document.createDocumentFragment();
    let n = 0;
    for (const c of cells) {
      if (c.col < offset || c.row < 0 || c.row >= ROWS) continue;
      const e = make(c);
      e.style.gridColumn = String(c.col - offset + 1);
      e.style.gridRow = String(c.row + 1);
      frag.append(e);
      n++;
    }
    box.dataset.count = String(n);
    box.replaceChildren(frag);
  }

  function pairs(e, c) {
    if (c.banker_pair) e.append(el('i', 'pair bp'));
    if (c.player_pair) e.append(el('i', 'pair pp'));
  }

  function beadCell(c, opt) {
    const e = el('div', 'cell bead ' + c.result);
    e.textContent = opt && opt.beadPoints ? String(num(c.point)) : ((opt && opt.letters) || { banker: 'B', player: 'P', tie: 'T' })[c.result] || '?';
    e.dataset.coup = String(c.coup);
    e.title = 'coup ' + c.coup + ': ' + c.result + ' ' + num(c.point) + (c.natural ? ', natural' : '');
    pairs(e, c);
    return e;
  }

  function bigRoadCell(c) {
    const e = el('div', 'cell bigroad ' + c.result);
    e.dataset.coup = String(c.coup);
    const ties = num(c.ties) + num(c.leading_ties);
    e.dataset.ties = String(ties);
    if (ties > 0) {
      e.append(el('i', 'tie-slash'));
      if (ties > 1) e.append(el('b', 'tie-count', ties));
    }
    pairs(e, c);
    return e;
  }

  function derivedCell(kind) {
    return (c) => {
      const e = el('div', 'cell');
      e.append(el('i', 'mk ' + kind + ' ' + (c.colour === 'red' || c.colour === 'blue' ? c.colour : 'none')));
      return e;
    };
  }

  const list = (v) => (Array.isArray(v) ? v : []);

  // draw draws a roads payload into the boxes {bead, big, bigeye, small,
  // roach}; opt.beadPoints shows the winning point on the bead plate.
  function draw(boxes, r, opt) {
    r = r || {};
    const grid = r.grid || {};
    drawRoad(boxes.bead, list(r.bead_plate), (c) => beadCell(c, opt));
    drawRoad(boxes.big, list(grid.big_road), bigRoadCell);
    // The newest result is marked on both, as boards blink it.
    for (const box of [boxes.bead, boxes.big]) {
      let newest = null;
      for (const e of box.children) if (!newest || +e.dataset.coup > +newest.dataset.coup) newest = e;
      if (newest) newest.classList.add('newest');
    }
    drawRoad(boxes.bigeye, list(grid.big_eye_boy), derivedCell('bigeye'));
    drawRoad(boxes.small, list(grid.small_road), derivedCell('small'));
    drawRoad(boxes.roach, list(grid.cockroach_pig), derivedCell('roach'));
  }

  return { draw: draw, drawRoad: drawRoad };
})();
