// Surveillance viewer: steps or plays through a replayed trail. The
// timeline (every input row in brief) comes once; the table at a step
// (cards, alerts, actions with their signers, roads, EV) is fetched when
// the step is shown. Everything from the trail goes in as text.
'use strict';

(function () {
  const $ = (id) => document.getElementById(id);
  const SUIT = { S: '\u2660', H: '\u2665', D: '\u2666', C: '\u2663' };
  const BET_NAMES = { player: 'Player', banker: 'Banker', tie: 'Tie', player_pair: 'Player Pair', banker_pair: 'Banker Pair', any_pair: 'Any Pair', perfect_pair: 'Perfect Pair', player_bonus: 'Player Bonus', banker_bonus: 'Banker Bonus' };
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  const url = (p) => new URL(p, location.origin + location.pathname).href;

  let tl = null;
  let cur = -1;
  let playing = false;
  let timer = 0;
  let seq = 0; // the latest step asked for: an older answer is dropped

  function rowOf(i) { return $('rows').tBodies[0].rows[i]; }

  function drawRows() {
    const tb = $('rows').tBodies[0];
    const frag = document.createDocumentFragment();
    for (const s of tl.steps) {
      const tr = el('tr');
      tr.dataset.i = String(s.i);
      if (s.alert) tr.classList.add('alert');
      if (s.by) tr.classList.add('action');
      if (s.diff) tr.classList.add('diff');
      tr.append(el('td', 't', s.time), el('td', 'num', s.seq), el('td', 'num', s.shoe ? s.shoe + '/' + s.coup : ''),
        el('td', '', s.input + (s.by ? ' by ' + s.by : '')), el('td', 'ev', s.events));
      frag.append(tr);
    }
    tb.replaceChildren(frag);
    tb.addEventListener('click', (ev) => {
      const tr = ev.target.closest('tr');
      if (tr) go(Number(tr.dataset.i));
    });
  }

  function cardEl(vc) {
    if (!vc || !vc.card) return el('span', 'c back', vc && vc.unreadable ? '?' : '');
    const c = String(vc.card);
    const e = el('span', 'c' + (/[HD]$/.test(c) ? ' red' : '') + (vc.manual ? ' manual' : ''), (c[0] === 'T' ? '10' : c[0]) + (SUIT[c[1]] || c[1]));
    e.dataset.card = c;
    return e;
  }

  function list(id, items, text, none) {
    const ul = $(id);
    ul.replaceChildren();
    for (const x of items) ul.append(el('li', '', text(x)));
    if (items.length === 0) ul.append(el('li', 'none', none));
  }

  // localTime is the row's time in the browser's time zone, with its
  // offset, to the microsecond as stored (Date keeps milliseconds only).
  function localTime(s) {
    const d = new Date(s.at);
    if (isNaN(d.getTime())) return '\u2013';
    const p = (n) => String(n).padStart(2, '0');
    const off = -d.getTimezoneOffset();
    const frac = String(s.time_us || '').split('.')[1] || '';
    return d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + p(d.getDate()) + ' ' + p(d.getHours()) + ':' + p(d.getMinutes()) + ':' + p(d.getSeconds()) +
      (frac ? '.' + frac : '') + ' UTC' + (off >= 0 ? '+' : '\u2212') + p(Math.floor(Math.abs(off) / 60)) + ':' + p(Math.abs(off) % 60);
  }

  function show(s) {
    const v = s.view || {};
    $('now-time').textContent = s.time_us || s.time;
    $('now-local').textContent = localTime(s);
    $('now-dealer').textContent = v.dealer || 'none signed in';
    $('btn-report').hidden = !s.shoe || !s.coup;
    $('btn-report').href = url('report?coup=' + encodeURIComponent(s.shoe + '/' + s.coup));
    $('now-seq').textContent = String(s.seq);
    $('now-coup').textContent = s.shoe ? s.shoe + ' \u00b7 ' + s.coup : '\u2013';
    $('now-phase').textContent = String(v.phase || '').replace(/_/g, ' ').toUpperCase() || '\u2013';
    $('now-suspended').hidden = !v.suspended;
    $('now-input').textContent = 'row ' + s.seq + ' (' + s.kind + '): ' + s.input + (s.events.length ? ' \u2192 ' + s.events.join('; ') : '');
    $('hand-player').replaceChildren(...(v.player || []).map(cardEl));
    $('hand-banker').replaceChildren(...(v.banker || []).map(cardEl));
    const shown = (side) => (v[side] || []).some((c) => c && c.card);
    $('player-point').textContent = shown('player') ? String(v.player_point) : '';
    $('banker-point').textContent = shown('banker') ? String(v.banker_point) : '';
    const r = v.result;
    $('result').hidden = !r;
    if (r) {
      $('result').className = 'result ' + r.winner;
      $('result').textContent = ({ banker: 'BANKER WINS', player: 'PLAYER WINS', tie: 'TIE' }[r.winner] || r.winner) + ' \u00b7 ' + r.player_point + ' \u2013 ' + r.banker_point;
    }
    list('alerts', v.alerts || [], (a) => String(a.kind).replace(/_/g, ' ').toUpperCase() + (a.coup ? ' coup ' + a.coup : '') + ': ' + a.message + ' (needs ' + a.needs + ')', 'none');
    list('actions', s.actions || [], (a) => a.action + (a.coup ? ' coup ' + a.coup : '') + (a.card ? ' ' + a.card : '') + ' \u00b7 signed by ' + a.by + (a.key_id ? ' (key ' + a.key_id + ')' : '') + ' \u00b7 ' + a.outcome + (a.reason ? ' \u00b7 \u201c' + a.reason + '\u201d' : ''), 'none');
    list('diffs', s.diffs || [], (d) => 'seq ' + d.seq + ' (' + d.kind + '): ' + d.detail, 'none at this row');
    const tb = $('ev-table').tBodies[0];
    tb.replaceChildren();
    for (const b of s.ev || []) {
      const tr = el('tr', b.advantage ? 'adv' : '');
      tr.dataset.bet = b.bet;
      const ev = typeof b.ev === 'number' ? (b.ev > 0 ? '+' : '') + (b.ev * 100).toFixed(3) + '%' : 'not priced';
      tr.append(el('td', '', BET_NAMES[b.bet] || b.bet), el('td', 'num', (b.p_win * 100).toFixed(2) + '%'), el('td', 'num', (b.p_push * 100).toFixed(2) + '%'), el('td', 'num', ev));
      tb.append(tr);
    }
    $('ev-cards').textContent = '\u00b7 ' + s.cards_remaining + ' cards left';
    $('ev-note').hidden = !s.ev_note;
    $('ev-note').textContent = s.ev_note || '';
    const rd = s.roads || {};
    window.tableRoads.draw({ bead: $('road-bead'), big: $('road-big'), bigeye: $('road-bigeye'), small: $('road-small'), roach: $('road-roach') }, rd);
    $('position').textContent = 'row ' + (s.i + 1) + ' of ' + tl.steps.length;
    document.body.dataset.step = String(s.i);
  }

  function go(i) {
    if (!tl || tl.steps.length === 0) return;
    i = Math.max(0, Math.min(tl.steps.length - 1, i));
    const old = rowOf(cur);
    if (old) old.classList.remove('current');
    cur = i;
    const tr = rowOf(i);
    tr.classList.add('current');
    tr.scrollIntoView({ block: 'nearest' });
    const my = ++seq;
    fetch(url('step/' + i), { cache: 'no-store' })
      .then((r) => { if (!r.ok) throw new Error('HTTP ' + r.status); return r.json(); })
      .then((s) => { if (my === seq) show(s); })
      .catch((e) => { $('jump-error').hidden = false; $('jump-error').textContent = 'step ' + i + ': ' + e.message; });
  }

  function coupStart(i, dir) {
    const coups = tl.coups;
    if (dir > 0) {
      const c = coups.find((m) => m.step > i);
      return c ? c.step : tl.steps.length - 1;
    }
    let best = 0;
    for (const m of coups) {
      if (m.step < i) best = m.step;
    }
    // From a coup's first row, go to the coup before it.
    return best;
  }

  function play(on) {
    playing = on;
    clearTimeout(timer);
    $('btn-play').textContent = on ? '\u275A\u275A PAUSE' : '\u25B6 PLAY';
    document.body.dataset.playing = String(on);
    if (on) tick();
  }
  function tick() {
    if (!playing) return;
    if (cur >= tl.steps.length - 1) { play(false); return; }
    const a = Date.parse(tl.steps[cur].time.replace(' ', 'T') + 'Z');
    const b = Date.parse(tl.steps[cur + 1].time.replace(' ', 'T') + 'Z');
    const speed = Number($('speed').value) || 1;
    const wait = Math.min(1500, Math.max(30, (b - a) / speed));
    timer = setTimeout(() => { go(cur + 1); tick(); }, wait);
  }

  function jump(query) {
    $('jump-error').hidden = true;
    fetch(url('find?' + query), { cache: 'no-store' })
      .then((r) => r.json().then((v) => { if (!r.ok) throw new Error(v.error || 'HTTP ' + r.status); return v; }))
      .then((v) => { play(false); go(v.step); })
      .catch((e) => { $('jump-error').hidden = false; $('jump-error').textContent = e.message; });
  }

  $('btn-next').addEventListener('click', () => { play(false); go(cur + 1); });
  $('btn-prev').addEventListener('click', () => { play(false); go(cur - 1); });
  $('btn-next-coup').addEventListener('click', () => { play(false); go(coupStart(cur, 1)); });
  $('btn-prev-coup').addEventListener('click', () => { play(false); go(coupStart(cur, -1)); });
  $('btn-play').addEventListener('click', () => play(!playing));
  // The header's difference count steps through the rows that differ.
  $('diff-count').addEventListener('click', () => {
    const next = tl.steps.find((s) => s.diff && s.i > cur) || tl.steps.find((s) => s.diff);
    if (next) { play(false); go(next.i); }
  });
  $('jump-coup-form').addEventListener('submit', (e) => { e.preventDefault(); jump('coup=' + encodeURIComponent($('jump-coup').value)); });
  $('jump-time-form').addEventListener('submit', (e) => { e.preventDefault(); jump('time=' + encodeURIComponent($('jump-time').value)); });
  document.addEventListener('keydown', (e) => {
    if (e.target.tagName === 'INPUT' || e.target.tagName === 'SELECT') return;
    if (e.key === 'ArrowRight') { play(false); go(cur + 1); }
    if (e.key === 'ArrowLeft') { play(false); go(cur - 1); }
    if (e.key === ' ') { e.preventDefault(); play(!playing); }
  });

  fetch(url('timeline.json'), { cache: 'no-store' })
    .then((r) => { if (!r.ok) throw new Error('HTTP ' + r.status); return r.json(); })
    .then((t) => {
      tl = t;
      $('table-name').textContent = t.table || '';
      $('source').textContent = t.source || '';
      $('rows-count').textContent = t.rows + ' rows \u00b7 ' + t.steps.length + ' inputs \u00b7 ' + t.coups.length + ' coups';
      const nd = (t.differences || []).length;
      $('diff-count').hidden = nd === 0;
      $('diff-count').textContent = nd + (nd === 1 ? ' DIFFERENCE' : ' DIFFERENCES');
      $('diff-count').title = 'go to the next row with a difference';
      drawRows();
      window.viewer = { timeline: t, go: go, current: () => cur };
      go(0);
    })
    .catch((e) => { $('jump-error').hidden = false; $('jump-error').textContent = 'cannot load the trail: ' + e.message; });
})();
