// Table display: an MQTT client over WebSocket (vendor/mqtt.min.js) that
// draws the table from the retained topics under the table's prefix. It
// keeps nothing of its own: every message replaces what it shows, so a
// reconnect (retained state arrives again) or a reload shows the truth.
// Everything from the broker goes into the page as text (textContent),
// never as markup.
'use strict';

(function () {
  const body = document.body;
  const VIEW = body.dataset.view === 'pit' ? 'pit' : 'public';
  const SUIT = { S: '\u2660', H: '\u2665', D: '\u2666', C: '\u2663' };
  const RED_SUITS = { H: true, D: true };
  const PHASES = {
    no_shoe: 'WAITING FOR A NEW SHOE',
    burn: 'BURNING CARDS',
    betting_open: 'PLACE YOUR BETS',
    betting_closed: 'NO MORE BETS',
    dealing: 'DEALING',
    result: 'RESULT',
  };
  // The public reasons of a suspension (coup.PublicReasons); an unknown
  // one reads as the first.
  const REASONS = {
    table_check: 'TABLE CHECK',
    card_check: 'CHECKING THE CARDS',
    shoe_check: 'CHECKING THE SHOE',
    system_check: 'TECHNICAL CHECK',
  };
  const MSG = {
    suspended: 'no bets, no cards until the game resumes',
    offline: 'no bets \u00b7 what you see is the table\u2019s last known state',
  };
  // The screen's language: ?lang=, else the controller's setting (once
  // the settings are in); the pit's own panels stay in English.
  const i18n = window.tableI18n;
  const T = (en) => (i18n ? i18n.t(en) : en);
  const LANG = new URLSearchParams(location.search).get('lang');
  function useLanguage(lang) { if (i18n) { i18n.use(lang || 'en', $('screen')); lastRoadsKey = ''; } }
  // A stream overlay (a video mixer's browser source: OBS): ?layout=
  // lower-third or side-bar, on a transparent page. Public only.
  const LAYOUT = new URLSearchParams(location.search).get('layout');
  if (VIEW === 'public' && (LAYOUT === 'lower-third' || LAYOUT === 'side-bar')) body.classList.add('overlay', 'overlay-' + LAYOUT);
  // Bead cells show B/P/T, or the winning point with ?bead=points.
  const BEAD_POINTS = new URLSearchParams(location.search).get('bead') === 'points';

  // What the page knows; each topic's latest payload (null: none yet).
  const state = {
    conn: 'connecting',
    connDetail: '',
    status: null,
    coup: null,
    shoe: null,
    roads: null,
    alerts: null,
    pitShoe: null,
    recall: null,
    recallError: '',
    // recallView is the recall record the pit chose to show instead of the
    // live coup (recall mode), null for the live game.
    recallView: null,
    dealerStats: null, // the pit's figures per dealer (audit/stats), when served
    reply: null, // the latest command reply (pit)
  };
  let settings = null;
  // hooks lets pit.js draw after each render and hear command replies,
  // without this file knowing about signing.
  const hooks = { render: [], reply: [] };
  window.tableDisplay = { state: state, view: VIEW, hooks: hooks, client: null, settings: null, schedule: () => schedule() };

  // url makes a path of the page absolute on the page's origin. A page
  // opened as http://user:pass@host/pit has its credentials in its base
  // URL, and fetch refuses any URL resolved against it; the origin never
  // holds them, and the browser sends the credentials it was given for
  // the page on its own.
  function url(p) { return new URL(p, location.origin + location.pathname).href; }

  const $ = (id) => document.getElementById(id);
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function num(v) { return typeof v === 'number' && isFinite(v) ? v : 0; }
  function pct(v) { return (Math.round(num(v) * 10) / 10).toFixed(1) + '%'; }
  function setText(id, text) { const e = $(id); if (e.textContent !== String(text)) e.textContent = String(text); }
  function show(id, on) { $(id).hidden = !on; }

  // ------------------------------------------------------------ rendering
  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    // A short timer, not requestAnimationFrame: a screen in a background
    // tab or a headless browser still draws, and a burst of messages (a
    // reconnect) draws once.
    setTimeout(() => { pending = false; render(); }, 16);
  }

  function render() {
    renderStatus();
    renderCoup();
    renderShoe();
    renderRoads();
    if (VIEW === 'pit') renderPit();
    for (const h of hooks.render) {
      try { h(state); } catch (e) { console.warn('table display: render hook:', e && e.message); }
    }
    body.dataset.rendered = String(Number(body.dataset.rendered || 0) + 1);
  }

  function tableState() {
    const st = state.status;
    const c = state.coup;
    if (st && st.state === 'offline') return 'offline';
    if ((st && st.suspended) || (c && c.suspended)) return 'suspended';
    if (st && st.state === 'replay') return 'replay';
    if (st && st.state === 'online') return 'live';
    return 'waiting';
  }

  // loaded is true once the table's retained state has arrived: until
  // then the page says it is loading rather than showing an empty table
  // (no shoe, 0/0/0) that is not the table's.
  function loaded() {
    const st = state.status;
    if (!st) return false;
    if (st.state === 'offline' && !state.coup) return true;
    return !!(state.coup && state.roads && state.shoe) && (VIEW !== 'pit' || !!state.alerts);
  }

  // What clears an alert, worst first: a void loses the coup's bets, a
  // card or the shoe's link must be fetched, a resume only decided.
  const NEEDS_RANK = { void: 0, card: 1, link: 2, resume: 3 };
  const NEEDS_TEXT = { void: 'void the coup', card: 'enter the card (or void the coup)', link: 'bring the shoe back, then resume', resume: 'resume' };
  function worstAlert(list) {
    let worst = null;
    for (const a of list) {
      const r = a.needs in NEEDS_RANK ? NEEDS_RANK[a.needs] : 9;
      if (worst === null || r < worst.r) worst = { a: a, r: r };
    }
    return worst ? worst.a : null;
  }
  function alertName(a) { return String(a.kind || a.source || 'alert').replace(/_/g, ' ').toUpperCase(); }

  // What the public reads of why the table is suspended: a word of the
  // controller's fixed list (coup.PublicReasons), never a supervisor's
  // note, which only the pit's topics carry.
  function publicReason(st) {
    const code = st.suspend_reason || (state.coup && state.coup.suspend_reason) || '';
    return T(REASONS[code] || REASONS.table_check) + ' \u00b7 ' + T(MSG.suspended);
  }

  // The pit reads the worst alert holding the table and what clears it,
  // or the supervisor's note (pit/coup), or the status's public reason
  // (the trail failing holds the table from outside the game).
  function pitReason(st) {
    const holding = state.alerts && Array.isArray(state.alerts.alerts)
      ? state.alerts.alerts.filter((a) => a && a.suspends) : [];
    if (holding.length > 0) {
      const w = worstAlert(holding);
      setText('suspend-count', holding.length === 1 ? '1 ALERT' : holding.length + ' ALERTS');
      show('suspend-count', true);
      // What clears it comes first: a long message is cut at the end.
      return alertName(w) + (w.coup ? ' \u00b7 coup ' + w.coup : '') +
        (w.needs ? ' \u2192 needs ' + w.needs + ' (' + (NEEDS_TEXT[w.needs] || w.needs) + ')' : '') + (w.message ? ' \u00b7 ' + w.message : '');
    }
    const note = state.coup && state.coup.suspended ? state.coup.suspend_reason : '';
    if (note) return note;
    return REASONS[st.suspend_reason] || MSG.suspended;
  }

  // phaseText is the coup panel's phase line: the table's state first, so
  // that a suspended or offline table, or a page that lost the broker,
  // never invites bets.
  function phaseText(c, rv) {
    if (rv) return 'RECALL \u00b7 SHOE ' + rv.shoe + ' COUP ' + rv.coup + (rv.voided ? ' \u00b7 VOIDED' : '');
    const ts = body.dataset.table;
    if (ts === 'suspended') return { text: T('NO BETS') + ' \u00b7 ' + T('GAME PAUSED'), held: true };
    if (ts === 'offline') return { text: T('NO BETS') + ' \u00b7 ' + T('TABLE OFFLINE'), held: true };
    if (state.conn !== 'online' && ts !== 'loading') return { text: T('NO CONNECTION'), held: true };
    const phase = (c && c.phase) || '';
    if (phase === 'no_shoe' && shoeOver()) return T('SHOE OVER') + ' \u00b7 ' + T('WAITING FOR A NEW SHOE');
    if (phase !== 'result') return PHASES[phase] ? T(PHASES[phase]) : '\u00a0';
    if (!c.result) return T('AWAITING REVEAL');
    // The pit sees the result before the public: the line says what the
    // table is waiting for, the result box that only the pit sees it.
    return T(unrevealed(c) ? 'AWAITING REVEAL' : PHASES.result);
  }

  function unrevealed(c) { return [].concat(c.player || [], c.banker || []).some((vc) => vc && vc.hidden); }

  // shoeOver: between shoes after one was dealt (its roads still up).
  function shoeOver() {
    const s = state.roads && state.roads.stats;
    return !!(s && num(s.coups) > 0);
  }

  function renderStatus() {
    const st = state.status || {};
    const isLoaded = loaded();
    body.dataset.loading = String(!isLoaded);
    show('banner-loading', !isLoaded && state.conn !== 'offline');
    if (!isLoaded) {
      setText('loading-detail', T(state.conn === 'online' ? 'reading the table\u2019s state\u2026' : 'connecting to the table\u2026'));
    }
    const ts = isLoaded ? tableState() : 'loading';
    const pill = $('table-state');
    pill.dataset.state = ts;
    setText('table-state', T({ offline: 'OFFLINE', suspended: 'SUSPENDED', replay: 'REPLAY', live: 'LIVE', waiting: 'WAITING', loading: 'LOADING' }[ts]));
    body.dataset.table = ts;

    // One line: it summarises (how many alerts, the worst, what clears
    // it) and lies above the table, never over the cards.
    const suspended = ts === 'suspended';
    show('banner-suspended', suspended);
    show('suspend-count', false);
    if (suspended) {
      const reason = VIEW === 'pit' ? pitReason(st) : publicReason(st);
      setText('suspend-reason', reason);
      $('banner-suspended').title = reason;
    }
    show('banner-offline', ts === 'offline');
    setText('offline-detail', VIEW === 'pit' ? 'the controller is not running: what you see is the last known state' : T(MSG.offline));

    const conn = $('conn');
    conn.dataset.state = state.conn;
    setText('conn-text', T({ online: 'CONNECTED', reconnecting: 'RECONNECTING', connecting: 'CONNECTING', offline: 'DISCONNECTED' }[state.conn] || state.conn.toUpperCase()));
    const lost = state.conn !== 'online';
    show('banner-conn', lost && (state.conn !== 'connecting' || state.connDetail !== ''));
    setText('conn-detail', state.connDetail || T('reconnecting to the table\u2026'));
    body.classList.toggle('stale', lost && state.conn !== 'connecting' || ts === 'offline');

    setText('table-name', (settings && settings.table) || '');
    const shoe = state.shoe || state.coup || st;
    setText('shoe-no', shoe && shoe.shoe ? shoe.shoe : '\u2013');
    const coupNo = state.coup && state.coup.coup ? state.coup.coup : (st.coup || 0);
    setText('coup-no', coupNo || '\u2013');
    setText('dealer', (state.coup && state.coup.dealer) || '\u2013');

    // Recall mode: the coup panel shows a past coup, and says so.
    const rv = VIEW === 'pit' ? state.recallView : null;
    body.dataset.mode = rv ? 'recall' : 'live';
    show('banner-recall', !!rv);
    if (rv) {
      setText('recall-detail', 'SHOE ' + rv.shoe + ' \u00b7 COUP ' + rv.coup + (rv.voided ? ' \u00b7 VOID' : '') +
        (rv.dealer ? ' \u00b7 DEALER ' + rv.dealer : '') + ' \u00b7 the live table is coup ' + (coupNo || '\u2013'));
    }
  }

  // lastCoup lays the view's last coup out as the coup panel draws a coup.
  function lastCoup(l) {
    const vc = (list) => (Array.isArray(list) ? list : []).map((card) => ({ card }));
    return { last: true, coup: l.coup, phase: 'result', player: vc(l.player), banker: vc(l.banker),
      player_point: num(l.result.player_point), banker_point: num(l.result.banker_point), result: l.result };
  }

  // renderRound shows the round's id for a dispute (the table, the date
  // and the shoe and coup, the time betting opened, UTC) and the betting
  // countdown when the table's betting time runs.
  function renderRound(c) {
    const at = c && c.opened_at ? new Date(c.opened_at) : null;
    let id = '';
    if (at && !isNaN(at.getTime()) && c.coup) {
      const iso = at.toISOString();
      id = ((settings && settings.table) || 'T') + '-' + iso.slice(0, 10).replace(/-/g, '') + '-' + c.shoe + '-' + c.coup + ' \u00b7 ' + iso.slice(11, 19) + ' UTC';
    }
    setText('round-id', id || '\u2013');
    const closes = c && c.phase === 'betting_open' && c.bets_close_at && body.dataset.table === 'live' ? Date.parse(c.bets_close_at) : NaN;
    const left = isNaN(closes) ? -1 : Math.max(0, Math.ceil((closes - Date.now()) / 1000));
    show('countdown', left >= 0);
    if (left >= 0) setText('countdown', String(left));
    $('countdown').dataset.low = String(left >= 0 && left <= 5);
    if (left > 0) { clearTimeout(countdownTimer); countdownTimer = setTimeout(schedule, 250); }
  }
  let countdownTimer = 0;

  // recallCoup lays a recall record out as the coup panel draws a coup.
  function recallCoup(r) {
    const pts = /^(\d)-(\d)$/.exec(r.points || '') || [];
    const vc = (list) => (Array.isArray(list) ? list : []).map((card) => ({ card }));
    return {
      recall: true, shoe: r.shoe, coup: r.coup, phase: 'result', player: vc(r.player), banker: vc(r.banker),
      player_point: Number(pts[1] || 0), banker_point: Number(pts[2] || 0),
      result: r.winner && !r.voided ? { winner: r.winner, player_point: Number(pts[1] || 0), banker_point: Number(pts[2] || 0) } : null,
    };
  }

  // cardKey says what a card slot shows, so an unchanged card keeps its
  // element (no animation) and a changed one is drawn anew.
  function cardKey(vc) {
    if (vc.card) return vc.card + (vc.hidden ? ':h' : '') + (vc.manual ? ':m' : '');
    return vc.unreadable ? '??' : 'back';
  }

  function cardEl(vc) {
    const c = el('div', 'card');
    if (vc.card && /^[A2-9TJQK][SHDC]$/.test(vc.card)) {
      const rank = vc.card[0] === 'T' ? '10' : vc.card[0];
      const suit = vc.card[1];
      c.classList.add('face', RED_SUITS[suit] ? 'red' : 'black');
      c.dataset.card = vc.card;
      c.setAttribute('aria-label', vc.card);
      for (const pos of ['tl', 'br']) {
        const idx = el('span', 'idx ' + pos);
        idx.append(el('span', '', rank), el('span', '', SUIT[suit]));
        c.append(idx);
      }
      const center = el('span', 'center');
      center.append(el('span', 'r', rank), el('span', 's', SUIT[suit]));
      c.append(center);
      if (vc.hidden) {
        // Only the pit sees a card before the public does.
        c.classList.add('unrevealed');
        c.append(el('span', 'badge', 'NOT REVEALED'));
      } else if (vc.manual) {
        c.append(el('span', 'badge', 'MANUAL'));
      }
    } else if (vc.unreadable) {
      c.classList.add('back', 'unreadable');
      c.textContent = '?';
      c.append(el('span', 'badge', 'UNREADABLE'));
    } else {
      c.classList.add('back');
    }
    return c;
  }

  function renderHand(id, cards) {
    const box = $(id);
    const list = Array.isArray(cards) ? cards.slice(0, 3) : [];
    for (let i = 0; i < list.length; i++) {
      const key = cardKey(list[i] || {});
      const old = box.children[i];
      if (old && old.dataset.key === key) continue;
      const slot = el('div', 'slot' + (i === 2 ? ' third' : ''));
      if (old && old.dataset.key === 'back') slot.classList.add('flip');
      slot.dataset.key = key;
      slot.append(cardEl(list[i] || {}));
      if (old) old.replaceWith(slot); else box.append(slot);
    }
    while (box.children.length > list.length) box.lastElementChild.remove();
  }

  function renderCoup() {
    const rv = VIEW === 'pit' ? state.recallView : null;
    const live = rv ? recallCoup(rv) : state.coup;
    const phase = (live && live.phase) || '';
    const ph = $('phase');
    const pt = phaseText(live, rv);
    ph.dataset.phase = typeof pt === 'object' ? 'held' : phase;
    setText('phase', typeof pt === 'object' ? pt.text : pt);
    renderRound(rv ? null : live);
    // As boards do, the last result stays up through betting, until the
    // next coup's first card.
    const c = !rv && live && live.last && live.last.result ? lastCoup(live.last) : live;
    body.dataset.held = String(c !== live);
    setText('last-tag', c !== live ? T('LAST RESULT') + ' \u00b7 ' + T('COUP') + ' ' + live.last.coup : '');

    renderHand('player-cards', c ? c.player : []);
    renderHand('banker-cards', c ? c.banker : []);
    const shown = (side) => c && Array.isArray(c[side]) && c[side].some((vc) => vc && vc.card);
    setText('player-point', shown('player') ? num(c.player_point) : '');
    setText('banker-point', shown('banker') ? num(c.banker_point) : '');

    const r = c && c.result;
    const box = $('result');
    $('hand-player').classList.toggle('won', !!r && r.winner === 'player');
    $('hand-banker').classList.toggle('won', !!r && r.winner === 'banker');
    if (!r || !r.winner) {
      box.hidden = true;
      box.dataset.winner = '';
      return;
    }
    const key = [c.recall ? 'recall' : c.last ? 'last' : 'live', c.shoe, c.coup, r.winner, unrevealed(c)].join('/');
    box.dataset.unrevealed = String(unrevealed(c));
    if (box.dataset.key !== key) {
      box.dataset.key = key;
      box.hidden = false;
      box.dataset.winner = r.winner;
      setText('result-text', T({ banker: 'BANKER WINS', player: 'PLAYER WINS', tie: 'TIE' }[r.winner] || String(r.winner).toUpperCase()));
      const pts = r.winner === 'banker'
        ? num(r.banker_point) + ' \u2013 ' + num(r.player_point)
        : num(r.player_point) + ' \u2013 ' + num(r.banker_point);
      setText('result-points', pts);
      const tags = $('result-tags');
      tags.replaceChildren();
      if (unrevealed(c)) tags.append(el('span', 'tag pit-only-tag', 'PIT ONLY \u00b7 NOT YET REVEALED'));
      if (r.player_natural || r.banker_natural) tags.append(el('span', 'tag natural', T('NATURAL')));
      if (r.banker_pair) tags.append(el('span', 'tag banker-pair', 'BANKER PAIR'));
      if (r.player_pair) tags.append(el('span', 'tag player-pair', 'PLAYER PAIR'));
    }
  }

  // money shows minor units as the profile counts them: 10 is 0.10,
  // 250000 is 2,500.
  function money(v) {
    const n = num(v) / 100;
    return n.toLocaleString('en-US', { minimumFractionDigits: Number.isInteger(n) ? 0 : 2, maximumFractionDigits: 2 });
  }

  // renderLimits: the table's minimum and maximum, and the main spots' and
  // the tie's own maximum, as boards show them.
  function renderLimits() {
    const l = settings && settings.limits;
    const per = (l && l.per_bet) || {};
    // A profile without limits (all 0) shows none.
    const any = !!l && (num(l.min) > 0 || num(l.max) > 0 || Object.keys(per).length > 0);
    show('limits', any);
    if (!any) return;
    let text = T('LIMITS') + ' ' + money(l.min) + (l.max ? ' \u2013 ' + money(l.max) : '');
    if (per.player && per.player === per.banker) text += ' \u00b7 ' + T('P/B') + ' \u2264 ' + money(per.player);
    if (per.tie) text += ' \u00b7 ' + T('TIE') + ' \u2264 ' + money(per.tie);
    setText('limits', text);
  }

  function renderShoe() {
    renderLimits();
    const s = state.shoe || state.coup || {};
    const dealt = num(s.cards_dealt);
    const remaining = num(s.cards_remaining);
    setText('cards-dealt', dealt);
    setText('cards-remaining', remaining);
    const total = dealt + remaining;
    $('shoe-fill').style.width = total > 0 ? (100 * dealt / total).toFixed(2) + '%' : '0%';
    const cut = $('cut-card');
    cut.hidden = !s.cut_card_seen;
    if (s.cut_card_seen) setText('cut-card', s.last_coup ? T('CUT CARD OUT') + ' \u00b7 ' + T('LAST COUP') + ' ' + s.last_coup : T('CUT CARD OUT'));
  }

  let lastRoadsKey = '';
  function renderRoads() {
    const r = state.roads || {};
    const grid = r.grid || {};
    const list = (v) => (Array.isArray(v) ? v : []);
    // Roads only change with a result, a void or a new shoe; the size of
    // the screen changes how many columns show, and so do
    // the banners too: they take the roads' height, and so their cells'.
    const key = JSON.stringify([r, window.innerWidth, window.innerHeight, $('road-big').clientHeight, $('road-bigeye').clientHeight]);
    if (key !== lastRoadsKey) {
      lastRoadsKey = key;
      window.tableRoads.draw({ bead: $('road-bead'), big: $('road-big'), bigeye: $('road-bigeye'), small: $('road-small'), roach: $('road-roach') },
        r, { beadPoints: BEAD_POINTS, letters: { banker: T('B'), player: T('P'), tie: T('T') } });
    }

    const s = r.stats || {};
    for (const side of ['banker', 'player', 'tie']) {
      const box = $('stat-' + side);
      const v = s[side] || {};
      box.querySelector('.stat-count').textContent = String(num(v.count));
      box.querySelector('.stat-pct').textContent = pct(v.percent);
      box.dataset.count = String(num(v.count));
      $('stat-bar').querySelector('.' + side).style.width = num(v.percent) + '%';
    }
    $('stat-banker-pairs').querySelector('b').textContent = String(num((s.banker_pairs || {}).count));
    $('stat-player-pairs').querySelector('b').textContent = String(num((s.player_pairs || {}).count));
    $('stat-naturals').querySelector('b').textContent = String(num((s.naturals || {}).count));
    $('stat-coups').querySelector('b').textContent = String(num(s.coups));

    // Between shoes there is no next coup to predict.
    const between = !state.coup || !state.coup.phase || state.coup.phase === 'no_shoe';
    $('predict').dataset.off = String(between);
    const p = between ? {} : (r.predict || {});
    for (const side of ['banker', 'player']) {
      const want = p[side] || {};
      for (const mk of $('predict-' + side).querySelectorAll('.mk')) {
        const colour = want[mk.dataset.road];
        mk.classList.remove('red', 'blue', 'none');
        mk.classList.add(colour === 'red' || colour === 'blue' ? colour : 'none');
        mk.dataset.colour = colour || '';
      }
    }
  }

  // ------------------------------------------------------------------ pit
  const BET_NAMES = {
    player: 'Player', banker: 'Banker', tie: 'Tie', player_pair: 'Player Pair', banker_pair: 'Banker Pair',
    any_pair: 'Any Pair', perfect_pair: 'Perfect Pair', player_bonus: 'Player Bonus', banker_bonus: 'Banker Bonus',
  };
  function betName(b) {
    if (BET_NAMES[b]) return BET_NAMES[b];
    const m = /^winning_number_(\d)$/.exec(b);
    return m ? 'Winning Number ' + m[1] : String(b);
  }
  function signedPct(v) { return (v > 0 ? '+' : '') + (v * 100).toFixed(3) + '%'; }

  function cardSpan(text) {
    const s = el('span', 'c', text);
    if (/^[A2-9TJQK][HD]$/.test(text)) s.classList.add('red');
    if (/^[A2-9TJQK][SHDC]$/.test(text)) s.textContent = (text[0] === 'T' ? '10' : text[0]) + SUIT[text[1]];
    return s;
  }
  // cardsCell lists cards; suspended and open are the places of those
  // drawn while the table was suspended or betting was open (in no hand),
  // marked.
  function cardsCell(cards, manual, suspended, open) {
    const td = el('td', 'cs');
    const list = Array.isArray(cards) ? cards : [];
    for (let i = 0; i < list.length; i++) {
      const c = list[i];
      const s = cardSpan(String(c));
      if (manual && manual.includes(c)) s.classList.add('manual');
      if (Array.isArray(suspended) && suspended.includes(i)) {
        s.classList.add('stray');
        s.title = 'drawn while the table was suspended: in no hand';
        s.append(el('sup', '', 'SUSP'));
      } else if (Array.isArray(open) && open.includes(i)) {
        s.classList.add('stray');
        s.title = 'drawn while betting was open (a misdeal): in no hand';
        s.append(el('sup', '', 'OPEN'));
      }
      td.append(s);
    }
    return td;
  }

  function renderPit() {
    // Active alerts.
    const alerts = (state.alerts && Array.isArray(state.alerts.alerts)) ? state.alerts.alerts : [];
    setText('alert-count', alerts.length);
    const ul = $('alert-list');
    ul.replaceChildren();
    if (alerts.length === 0) ul.append(el('li', 'none', state.alerts ? 'No active alert' : 'Waiting for the alert list\u2026'));
    for (const a of alerts) {
      const li = el('li', a.suspends ? 'suspends' : '');
      li.append(el('span', 'kind', (a.kind || a.source || 'alert').replace(/_/g, ' ').toUpperCase()));
      if (a.coup) li.append(document.createTextNode(' \u00b7 coup ' + a.coup));
      if (a.needs) li.append(document.createTextNode(' \u00b7 '), el('span', 'needs', 'needs ' + a.needs));
      li.append(el('span', 'msg', a.message || ''));
      ul.append(li);
    }

    // Remaining shoe and EV.
    const ps = state.pitShoe;
    const tbody = $('ev-table').querySelector('tbody');
    tbody.replaceChildren();
    const adv = [];
    setText('ev-cards', ps ? '\u00b7 ' + num(ps.cards_remaining) + ' CARDS' : '');
    const ranks = $('ev-ranks');
    ranks.replaceChildren();
    if (ps && ps.ranks && typeof ps.ranks === 'object') {
      for (const rk of ['A', '2', '3', '4', '5', '6', '7', '8', '9', 'T', 'J', 'Q', 'K']) {
        if (!(rk in ps.ranks)) continue;
        const s = el('span');
        s.append(el('b', '', rk === 'T' ? '10' : rk), document.createTextNode(String(num(ps.ranks[rk]))));
        ranks.append(s);
      }
    }
    for (const b of (ps && Array.isArray(ps.bets)) ? ps.bets : []) {
      const ev = typeof b.ev === 'number' ? b.ev : null;
      const tr = el('tr');
      tr.dataset.bet = b.bet;
      const advantage = b.advantage || (ev !== null && ev > 0);
      if (advantage) { tr.classList.add('adv'); adv.push(betName(b.bet) + ' ' + signedPct(ev || 0)); }
      tr.append(el('td', '', betName(b.bet)), el('td', 'num', pct(num(b.p_win) * 100)), el('td', 'num', pct(num(b.p_push) * 100)));
      const evTd = el('td', 'num ev', ev === null ? 'not priced' : signedPct(ev));
      if (ev !== null) evTd.classList.add(ev > 0 ? 'pos' : 'neg');
      tr.append(evTd);
      tbody.append(tr);
    }
    const note = ps && ps.note ? ps.note : (ps ? '' : 'Waiting for the remaining-shoe analysis\u2026');
    show('ev-note', note !== '');
    setText('ev-note', note);
    show('banner-advantage', adv.length > 0);
    setText('advantage-detail', adv.join(' \u00b7 '));

    // Recall: newest first.
    const rb = $('recall-table').querySelector('tbody');
    rb.replaceChildren();
    const rec = Array.isArray(state.recall) ? state.recall.slice(-10).reverse() : [];
    for (const r of rec) {
      const tr = el('tr', r.voided ? 'voided' : '');
      tr.dataset.coup = String(r.coup);
      tr.dataset.shoe = String(r.shoe);
      if (state.recallView && state.recallView.shoe === r.shoe && state.recallView.coup === r.coup) tr.classList.add('recalled');
      // A row is a button: the keyboard reaches it (Tab) and shows it
      // (Enter or Space), as a click does.
      tr.tabIndex = 0;
      tr.setAttribute('role', 'button');
      tr.setAttribute('aria-label', 'show coup ' + r.shoe + '/' + r.coup);
      const pick = () => { state.recallView = r; focusRecall = r.shoe + '/' + r.coup; schedule(); };
      tr.addEventListener('click', pick);
      tr.addEventListener('keydown', (ev) => { if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); pick(); } });
      tr.append(el('td', 'num', r.shoe + '/' + r.coup), cardsCell(r.cards, r.manual, r.suspended, r.betting_open), cardsCell(r.player), cardsCell(r.banker));
      const td = el('td', r.winner && !r.voided ? 'w-' + r.winner : '', r.voided ? 'VOID' : (r.winner || '').toUpperCase());
      // points are "player-banker"
      const pts = /^(\d)-(\d)$/.exec(r.points || '');
      if (pts) td.append(el('span', 'pts', 'P' + pts[1] + ' B' + pts[2]));
      tr.append(td);
      rb.append(tr);
      // The table is drawn anew on each render: the focus stays on the row.
      if (focusRecall === r.shoe + '/' + r.coup && document.activeElement === document.body) tr.focus();
    }
    // Dealers: the figures per dealer on this trail.
    const db = $('dealer-table').querySelector('tbody');
    db.replaceChildren();
    const ds = state.dealerStats && Array.isArray(state.dealerStats.rows) ? state.dealerStats.rows : [];
    for (const r of ds) {
      const tr = el('tr');
      tr.dataset.dealer = r.key;
      for (const v of [r.key, r.coups, r.coups_per_hour, r.seconds_per_coup, r.misdeals_per_100_coups, r.voids_per_100_coups]) {
        tr.append(el('td', typeof v === 'number' ? 'num' : '', String(v)));
      }
      db.append(tr);
    }
    const rnote = state.recallError || (state.recall === null ? 'Loading\u2026' : (rec.length === 0 ? 'No coup yet' : ''));
    show('recall-note', rnote !== '');
    setText('recall-note', rnote);
  }

  let focusRecall = '';

  // Recall is not on MQTT: the pit fetches it from the controller whenever
  // a coup ends or is voided (a change of coup, phase or roads).
  let recallKey = '';
  let recallTimer = 0;
  function maybeFetchRecall(force) {
    if (VIEW !== 'pit' || !settings || !settings.recall) return;
    const c = state.coup || {};
    const r = state.roads || {};
    const key = [c.shoe, c.coup, c.phase, c.dealer, r.stats ? r.stats.coups : 0, (r.bead_plate || []).length].join('/');
    if (!force && key === recallKey) return;
    recallKey = key;
    clearTimeout(recallTimer);
    recallTimer = setTimeout(() => {
      fetch(url(settings.recall), { cache: 'no-store', credentials: 'same-origin' })
        .then((resp) => {
          if (!resp.ok) throw new Error('recall: HTTP ' + resp.status);
          return resp.json();
        })
        .then((list) => { state.recall = Array.isArray(list) ? list : []; state.recallError = ''; schedule(); })
        .catch((err) => { state.recallError = 'Recall unavailable: ' + err.message; schedule(); });
      fetchDealerStats();
    }, 150);
  }

  // The figures per dealer. Just after a start the controller is still
  // reading them from the trail (503): ask again when it says.
  let dealerStatsTimer = 0;
  function fetchDealerStats() {
    if (!settings.dealer_stats) return;
    clearTimeout(dealerStatsTimer);
    fetch(url(settings.dealer_stats), { cache: 'no-store', credentials: 'same-origin' })
      .then((resp) => {
        if (resp.status === 503) {
          const after = Number(resp.headers.get('Retry-After')) || 5;
          dealerStatsTimer = setTimeout(fetchDealerStats, after * 1000);
          return undefined;
        }
        return resp.ok ? resp.json() : null;
      })
      .then((rep) => { if (rep !== undefined) { state.dealerStats = rep; schedule(); } })
      .catch(() => {});
  }

  // ----------------------------------------------------------------- MQTT
  function topicsFor(prefix) {
    const t = {
      status: prefix + '/status',
      coup: prefix + (VIEW === 'pit' ? '/pit/coup' : '/public/coup'),
      shoe: prefix + '/public/shoe',
      roads: prefix + '/public/roads',
    };
    if (VIEW === 'pit') {
      t.alerts = prefix + '/pit/alerts/active';
      t.pitShoe = prefix + '/pit/shoe';
      t.reply = prefix + '/cmd/reply'; // replies to the pit console's commands
    }
    return t;
  }

  function brokerURL(ws) {
    if (ws.startsWith('/')) return (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + ws;
    return ws;
  }

  function randomID() {
    const a = new Uint8Array(4);
    crypto.getRandomValues(a);
    return Array.from(a, (b) => b.toString(16).padStart(2, '0')).join('');
  }

  function connect(cfg) {
    settings = cfg;
    if (!LANG && cfg.language) useLanguage(cfg.language);
    const topics = topicsFor(cfg.prefix);
    const byTopic = {};
    for (const [k, v] of Object.entries(topics)) byTopic[v] = k;
    const opts = {
      protocolVersion: 4, // MQTT 3.1.1: what every broker speaks
      clean: true,
      clientId: (cfg.client_id_prefix || 'td-') + randomID(),
      keepalive: 20,
      connectTimeout: 8000,
      reconnectPeriod: 2000,
      resubscribe: false, // subscribed again on every connect, below
    };
    if (cfg.username) opts.username = cfg.username;
    if (cfg.password) opts.password = cfg.password;
    const client = mqtt.connect(brokerURL(cfg.broker_ws), opts);
    window.tableDisplay.client = client;
    window.tableDisplay.settings = cfg;

    client.on('connect', () => {
      state.conn = 'online';
      state.connDetail = '';
      const subs = {};
      // One QoS for every topic of a connection. The pit takes its command
      // replies at QoS 1 (a lost reply leaves the console waiting), so it
      // takes the rest at QoS 1 too: a QoS 0 delivery gets no PUBACK, the
      // browser's kernel then acknowledges it up to 40 ms late, and
      // Mosquitto (Nagle's algorithm on) holds the next message, the
      // reply, until it does (TestDeployMosquittoPitReplies). A public
      // display takes everything at QoS 0.
      const qos = topics.reply ? 1 : 0;
      for (const t of Object.values(topics)) subs[t] = { qos };
      client.subscribe(subs, (err) => {
        if (err) { state.connDetail = 'subscribe refused: ' + err.message; schedule(); }
      });
      maybeFetchRecall(true);
      schedule();
    });
    client.on('reconnect', () => { state.conn = 'reconnecting'; schedule(); });
    client.on('close', () => { if (state.conn === 'online') state.conn = 'reconnecting'; schedule(); });
    client.on('offline', () => { state.conn = 'reconnecting'; schedule(); });
    client.on('error', (err) => { state.connDetail = 'broker: ' + (err && err.message ? err.message : String(err)); schedule(); });
    client.on('message', (topic, payload) => {
      const key = byTopic[topic];
      if (!key) return;
      let v = null;
      if (payload && payload.length > 0) {
        try { v = JSON.parse(new TextDecoder().decode(payload)); } catch (e) {
          console.warn('table display: bad JSON on', topic, e.message);
          return;
        }
      }
      if (key === 'reply') {
        state.reply = v;
        for (const h of hooks.reply) {
          try { h(v); } catch (e) { console.warn('table display: reply hook:', e && e.message); }
        }
        schedule();
        return;
      }
      state[key] = v;
      if (key === 'coup' || key === 'roads') maybeFetchRecall(false);
      schedule();
    });
  }

  // The settings come from the controller's HTTP; retry until it answers.
  let delay = 1000;
  function start() {
    fetch(url(body.dataset.config), { cache: 'no-store', credentials: 'same-origin' })
      .then((resp) => {
        if (!resp.ok) throw new Error('HTTP ' + resp.status);
        return resp.json();
      })
      .then((cfg) => {
        if (!cfg || typeof cfg.broker_ws !== 'string' || typeof cfg.prefix !== 'string') throw new Error('bad settings');
        if (typeof mqtt === 'undefined') throw new Error('mqtt.js did not load');
        connect(cfg);
      })
      .catch((err) => {
        state.conn = 'offline';
        state.connDetail = 'cannot load the display settings (' + err.message + '); retrying';
        schedule();
        setTimeout(start, delay);
        delay = Math.min(delay * 2, 30000);
      });
  }

  window.addEventListener('resize', schedule);
  useLanguage(LANG);
  if (VIEW === 'pit') $('recall-exit').addEventListener('click', () => { state.recallView = null; schedule(); });
  render();
  start();
})();
