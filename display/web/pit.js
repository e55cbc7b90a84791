// Pit console: the supervisor's actions from the pit view, signed in the
// browser. It builds the same command as `tablectl void` and the other
// supervisor commands (docs/mqtt.md, "Commands"): canonical JSON signed
// with Ed25519 after the "tablectl-command-v1\n" domain, sent on the
// table's cmd topic with the pit's broker login, and shows the table's
// reply from cmd/reply. The table checks it exactly as it checks the
// CLI's: its keyring, its window, its replay guard, its trail.
//
// The signing key is a WebCrypto Ed25519 key that cannot be read out of
// the browser (non-extractable), kept in this browser's IndexedDB: made
// here (the console then shows an enrolment request, signed with the new
// key, for the security officer to sign into the keyring), or imported
// once from a `tablectl keygen` key file. The server never sees it.
// docs/pit-console.md says why this and not WebAuthn.
//
// ACTIONS is the one list of what the console can do: add an entry (and,
// for a new kind of form field, a FIELDS entry) to extend it.
'use strict';

(function () {
  const td = window.tableDisplay;
  if (!td || td.view !== 'pit') return;
  const DOMAIN = 'tablectl-command-v1\n';
  const REPLY_WAIT_MS = 15000;
  const NAME_RE = /^[A-Za-z0-9._@-]{1,64}$/;

  // What the console can do. needs: the alert "needs" values the action
  // clears, so each alert shows the actions that clear it.
  const ACTIONS = [
    { action: 'void', label: 'VOID COUP', fields: ['coup', 'reason'], needs: ['void', 'card'], confirm: true },
    { action: 'card', label: 'ENTER CARD', fields: ['card', 'reason'], needs: ['card'] },
    { action: 'suspend', label: 'SUSPEND', fields: ['reason'] },
    { action: 'resume', label: 'RESUME', fields: ['reason'], needs: ['resume', 'link'] },
    { action: 'shoe-start', label: 'START SHOE', fields: ['reason'] },
    { action: 'shoe-end', label: 'END SHOE', fields: ['reason'] },
    { action: 'bets-closed', label: 'CLOSE BETTING', fields: ['coup', 'reason'] },
    { action: 'dealer-in', label: 'DEALER SIGN-IN', fields: ['dealer', 'reason'] },
    { action: 'dealer-out', label: 'DEALER SIGN-OUT', fields: ['reason'] },
  ];
  const FIELDS = {
    coup: { label: 'COUP', type: 'number', placeholder: '0 = in progress', hint: 'the coup (0: the one in progress)' },
    card: { label: 'CARD', type: 'text', placeholder: 'KH', hint: 'rank A23456789TJQK, suit SHDC' },
    reason: { label: 'REASON', type: 'text', placeholder: 'kept in the trail', hint: '' },
    dealer: { label: 'DEALER', type: 'text', placeholder: 'badge id', hint: 'the dealer\'s badge or staff id: letters, digits, . _ @ -' },
  };

  const $ = (id) => document.getElementById(id);
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function b64(bytes) {
    let s = '';
    for (const b of new Uint8Array(bytes)) s += String.fromCharCode(b);
    return btoa(s);
  }
  function unb64(s) {
    const bin = atob(s);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  function randomID() {
    const a = new Uint8Array(16);
    crypto.getRandomValues(a);
    return Array.from(a, (x) => x.toString(16).padStart(2, '0')).join('');
  }
  // keyID is audit.KeyID: the first 8 bytes of the public key's SHA-256, in hex.
  async function keyID(pubRaw) {
    const d = new Uint8Array(await crypto.subtle.digest('SHA-256', pubRaw));
    return Array.from(d.slice(0, 8), (x) => x.toString(16).padStart(2, '0')).join('');
  }

  // canonical is the command's canonical JSON (docs/audit.md): keys
  // sorted (ASCII keys: UTF-16 order is UTF-8 order), no whitespace,
  // strings as JSON.stringify writes them (only '"', '\\' and control
  // characters escaped, \u00xx in lower case), integers as written.
  function canonical(obj) {
    const keys = Object.keys(obj).sort();
    return '{' + keys.map((k) => {
      const v = obj[k];
      let s;
      if (typeof v === 'number') {
        if (!Number.isSafeInteger(v)) throw new Error(k + ' must be a whole number');
        s = String(v);
      } else if (typeof v === 'string') {
        if (typeof v.isWellFormed === 'function' && !v.isWellFormed()) throw new Error(k + ' holds a broken character');
        s = JSON.stringify(v);
      } else {
        throw new Error(k + ': only strings and whole numbers are signed');
      }
      return JSON.stringify(k) + ':' + s;
    }).join(',') + '}';
  }

  // ------------------------------------------------------------ key store
  const DB = 'tablectl-pit';
  const STORE = 'keys';
  function db() {
    return new Promise((resolve, reject) => {
      const req = indexedDB.open(DB, 1);
      req.onupgradeneeded = () => req.result.createObjectStore(STORE);
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
  }
  async function dbDo(mode, fn) {
    const d = await db();
    try {
      return await new Promise((resolve, reject) => {
        const tx = d.transaction(STORE, mode);
        const req = fn(tx.objectStore(STORE));
        tx.oncomplete = () => resolve(req && req.result);
        tx.onerror = () => reject(tx.error);
        tx.onabort = () => reject(tx.error || new Error('aborted'));
      });
    } finally { d.close(); }
  }
  const SLOT = 'signer';
  let signer = null; // {name, key (CryptoKey, non-extractable), pub (base64), id, created}

  async function loadSigner() {
    try { signer = (await dbDo('readonly', (s) => s.get(SLOT))) || null; } catch (e) { signer = null; note('cannot read the key store: ' + e.message, true); }
    drawKey();
  }
  async function keep(name, key, pubRaw, how) {
    const rec = { name: name, key: key, pub: b64(pubRaw), id: await keyID(pubRaw), created: new Date().toISOString(), how: how };
    await dbDo('readwrite', (s) => s.put(rec, SLOT));
    signer = rec;
    drawKey();
    return rec;
  }

  // generate makes a key in this browser; only its public half ever
  // leaves, for the keyring.
  async function generate(name) {
    if (!NAME_RE.test(name)) throw new Error('name: 1 to 64 of A-Z a-z 0-9 . _ @ -');
    const pair = await crypto.subtle.generateKey({ name: 'Ed25519' }, false, ['sign', 'verify']);
    const pub = await crypto.subtle.exportKey('raw', pair.publicKey);
    return keep(name, pair.privateKey, pub, 'made in this browser');
  }

  // importPEM takes a `tablectl keygen` key file (PKCS #8 PEM) once. It
  // reads the public half through a short-lived extractable copy, then
  // keeps a non-extractable one.
  async function importPEM(name, pem) {
    if (!NAME_RE.test(name)) throw new Error('name: 1 to 64 of A-Z a-z 0-9 . _ @ -');
    const m = /-----BEGIN PRIVATE KEY-----([A-Za-z0-9+/=\s]+)-----END PRIVATE KEY-----/.exec(pem);
    if (!m) throw new Error('not a PKCS #8 PEM private key (tablectl keygen writes NAME.key)');
    const der = unb64(m[1].replace(/\s+/g, ''));
    try {
      const tmp = await crypto.subtle.importKey('pkcs8', der, { name: 'Ed25519' }, true, ['sign']);
      const jwk = await crypto.subtle.exportKey('jwk', tmp);
      const pub = unb64(jwk.x.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - jwk.x.length % 4) % 4));
      const key = await crypto.subtle.importKey('pkcs8', der, { name: 'Ed25519' }, false, ['sign']);
      return await keep(name, key, pub, 'imported from a key file');
    } finally {
      der.fill(0);
    }
  }

  // enrolmentRequest is what the security officer enrols (tablectl enrol
  // --request): the name and the public key, signed with the key itself
  // after the "tablectl-enrolment-v1\n" domain (command.Request).
  async function enrolmentRequest() {
    if (!signer) throw new Error('no key in this browser');
    const req = { format: 'tablectl-enrolment-v1', name: signer.name, public_key: signer.pub, requested_at: signer.created.replace(/\.\d+Z$/, 'Z') };
    if (td.settings && td.settings.table) req.table = td.settings.table;
    const sig = await crypto.subtle.sign({ name: 'Ed25519' }, signer.key, new TextEncoder().encode('tablectl-enrolment-v1\n' + canonical(req)));
    req.sig = b64(sig);
    return JSON.stringify(req, null, 2);
  }

  async function forget() {
    await dbDo('readwrite', (s) => s.delete(SLOT));
    signer = null;
    drawKey();
  }

  // ------------------------------------------------------------- commands
  // sign builds and signs a command; it returns the wire bytes (text) and
  // the command. req: {action, coup, card, reason}.
  async function sign(req) {
    if (!signer) throw new Error('no signing key in this browser: make or import one');
    const cfg = td.settings;
    if (!cfg || !cfg.table) throw new Error('the page has no table id yet');
    const a = ACTIONS.find((x) => x.action === req.action);
    if (!a) throw new Error('unknown action ' + req.action);
    const cmd = { table: cfg.table, id: randomID(), action: a.action, supervisor: signer.name, issued_at: new Date().toISOString() };
    if (a.fields.includes('coup') && req.coup) {
      const n = Number(req.coup);
      if (!Number.isSafeInteger(n) || n < 0) throw new Error('coup: a whole number, 0 or more');
      if (n > 0) cmd.coup = n;
    }
    if (a.fields.includes('card')) {
      const c = String(req.card || '').trim().toUpperCase();
      if (!/^[A2-9TJQK][SHDC]$/.test(c)) throw new Error('card: rank A23456789TJQK then suit SHDC, as KH');
      cmd.card = c;
    }
    if (a.fields.includes('dealer')) {
      const d = String(req.dealer || '').trim();
      if (!NAME_RE.test(d)) throw new Error('dealer: 1 to 64 letters, digits, . _ @ -');
      cmd.dealer = d;
    }
    if (req.reason) cmd.reason = String(req.reason);
    const msg = new TextEncoder().encode(DOMAIN + canonical(cmd));
    const sig = await crypto.subtle.sign({ name: 'Ed25519' }, signer.key, msg);
    cmd.sig = b64(sig);
    return { wire: canonical(cmd), cmd: cmd };
  }

  const pending = new Map(); // id -> log entry
  const log = []; // newest first: {cmd, state, reply, at, error}

  async function send(req) {
    const entry = { at: new Date(), req: req, state: 'signing' };
    log.unshift(entry);
    if (log.length > 20) log.pop();
    drawLog();
    try {
      const s = await sign(req);
      entry.cmd = s.cmd;
      const client = td.client;
      if (!client || !client.connected) throw new Error('not connected to the table\u2019s broker');
      entry.state = 'sent';
      pending.set(s.cmd.id, entry);
      drawLog();
      await new Promise((resolve, reject) => {
        client.publish(td.settings.prefix + '/cmd', s.wire, { qos: 1, retain: false }, (err) => (err ? reject(err) : resolve()));
      });
      entry.timer = setTimeout(() => {
        if (entry.state === 'sent') { entry.state = 'no-reply'; pending.delete(s.cmd.id); drawLog(); }
      }, REPLY_WAIT_MS);
    } catch (e) {
      entry.state = 'error';
      entry.error = e && e.message ? e.message : String(e);
      if (entry.cmd) pending.delete(entry.cmd.id);
      drawLog();
    }
    return entry;
  }

  td.hooks.reply.push((rep) => {
    if (!rep || typeof rep.id !== 'string') return;
    const entry = pending.get(rep.id);
    if (!entry) return;
    pending.delete(rep.id);
    clearTimeout(entry.timer);
    entry.reply = rep;
    entry.state = rep.result === 'accepted' ? 'accepted' : 'refused';
    drawLog();
  });

  // --------------------------------------------------------------- drawing
  const box = $('pit-console');
  box.append(el('h3', '', 'PIT CONSOLE \u00b7 SIGNED COMMANDS'));
  const keyBox = el('div', 'pc-key');
  keyBox.id = 'pc-key';
  box.append(keyBox);

  const form = el('form', 'pc-form');
  form.id = 'pc-form';
  form.setAttribute('novalidate', '');
  const actionSel = el('select');
  actionSel.id = 'pc-action';
  for (const a of ACTIONS) {
    const o = el('option', '', a.label);
    o.value = a.action;
    actionSel.append(o);
  }
  const actLabel = el('label', 'pc-field');
  actLabel.append(el('span', '', 'ACTION'), actionSel);
  form.append(actLabel);
  const inputs = {};
  for (const [name, f] of Object.entries(FIELDS)) {
    const lab = el('label', 'pc-field pc-' + name);
    const inp = el('input');
    inp.id = 'pc-' + name;
    inp.type = f.type;
    inp.placeholder = f.placeholder;
    if (f.type === 'number') inp.min = '0';
    if (f.hint) inp.title = f.hint;
    inputs[name] = inp;
    lab.append(el('span', '', f.label), inp);
    form.append(lab);
  }
  const sendBtn = el('button', 'pc-send', 'SIGN & SEND');
  sendBtn.id = 'pc-send';
  sendBtn.type = 'submit';
  form.append(sendBtn);
  const confirmBox = el('div', 'pc-confirm');
  confirmBox.id = 'pc-confirm';
  confirmBox.hidden = true;
  box.append(form, confirmBox);
  const logList = el('ol', 'pc-log');
  logList.id = 'pc-log';
  box.append(logList);
  const noteLine = el('p', 'note');
  noteLine.id = 'pc-note';
  noteLine.hidden = true;
  box.append(noteLine);

  function note(text, bad) {
    noteLine.hidden = !text;
    noteLine.textContent = text || '';
    noteLine.classList.toggle('bad', !!bad);
  }

  function fieldsFor() {
    const a = ACTIONS.find((x) => x.action === actionSel.value) || ACTIONS[0];
    for (const [name, inp] of Object.entries(inputs)) inp.parentElement.hidden = !a.fields.includes(name);
    return a;
  }
  actionSel.addEventListener('change', fieldsFor);
  fieldsFor();

  // prepare fills the form; a void asks once more before it is signed.
  function prepare(action, args) {
    actionSel.value = action;
    fieldsFor();
    for (const [k, inp] of Object.entries(inputs)) inp.value = args && args[k] !== undefined ? String(args[k]) : '';
    inputs.reason.focus();
  }
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const a = fieldsFor();
    const req = { action: a.action };
    for (const f of a.fields) req[f] = inputs[f].value;
    if (a.confirm) {
      confirmBox.replaceChildren();
      confirmBox.hidden = false;
      const what = a.label + (req.coup && Number(req.coup) > 0 ? ' ' + req.coup : ' IN PROGRESS');
      const yes = el('button', 'pc-yes', 'CONFIRM ' + what);
      yes.id = 'pc-confirm-yes';
      yes.type = 'button';
      const no = el('button', 'pc-no', 'CANCEL');
      no.type = 'button';
      yes.addEventListener('click', () => { confirmBox.hidden = true; send(req); clearForm(); });
      no.addEventListener('click', () => { confirmBox.hidden = true; });
      confirmBox.append(el('span', '', 'Bets on it are returned. '), yes, no);
      return;
    }
    send(req);
    clearForm();
  });

  // clearForm empties the fields once a command is on its way: the next
  // one starts blank (a reason left in the field went into the trail as
  // part of the next command's).
  function clearForm() {
    for (const inp of Object.values(inputs)) inp.value = '';
    actionSel.focus();
  }

  function drawKey() {
    keyBox.replaceChildren();
    sendBtn.disabled = !signer;
    // Browsers give WebCrypto only to secure contexts: HTTPS, or the
    // page opened on the table box itself (127.0.0.1, localhost).
    if (!window.isSecureContext || !crypto.subtle) {
      sendBtn.disabled = true;
      keyBox.append(el('p', 'note bad', 'Signing needs a secure page: open the pit view over HTTPS (docs/pit-console.md), or on the table box itself. Nothing can be signed from this page.'));
      return;
    }
    if (signer) {
      const line = el('div', 'pc-signer');
      line.append(el('span', 'pc-who', 'SIGNING AS ' + signer.name), el('span', 'pc-id', 'key ' + signer.id + ' \u00b7 ' + signer.how + ' \u00b7 cannot be copied out of this browser'));
      const drop = el('button', 'pc-small', 'REMOVE KEY');
      drop.type = 'button';
      drop.addEventListener('click', () => { if (window.confirm('Remove the signing key from this browser?')) forget(); });
      line.append(drop);
      keyBox.append(line);
      // An imported key file is enrolled from tablectl keygen's request;
      // a key made here must be enrolled from this one.
      if (signer.how !== 'made in this browser') return;
      const enrol = el('div', 'pc-enrol');
      enrol.append(el('span', '', 'ENROLMENT REQUEST for the security officer, who checks key ' + signer.id + ' with you, enrols it and signs the keyring (tablectl enrol --request FILE, tablectl keyring sign); the table takes the key once the signed keyring is installed:'));
      const code = el('code', '', '');
      code.id = 'pc-enrol-request';
      enrol.append(code);
      keyBox.append(enrol);
      const shown = signer;
      enrolmentRequest().then((t) => { if (signer === shown) code.textContent = t; }).catch((e) => note('enrolment request: ' + e.message, true));
      return;
    }
    keyBox.append(el('p', 'note', 'No signing key in this browser. Make one here (the security officer then signs it into the keyring) or import your tablectl keygen key file once.'));
    const row = el('div', 'pc-keyform');
    const name = el('input');
    name.id = 'pc-key-name';
    name.placeholder = 'your name in the keyring';
    const gen = el('button', 'pc-small', 'MAKE A KEY HERE');
    gen.id = 'pc-key-generate';
    gen.type = 'button';
    gen.addEventListener('click', () => generate(name.value.trim()).then(() => note('')).catch((e) => note(e.message, true)));
    const pem = el('textarea');
    pem.id = 'pc-key-pem';
    pem.rows = 2;
    pem.placeholder = '-----BEGIN PRIVATE KEY----- (NAME.key from tablectl keygen)';
    const file = el('input');
    file.type = 'file';
    file.id = 'pc-key-file';
    file.addEventListener('change', () => {
      const f = file.files && file.files[0];
      if (!f) return;
      if (!name.value) name.value = f.name.replace(/\.key$/, '');
      f.text().then((t) => { pem.value = t; });
    });
    const imp = el('button', 'pc-small', 'IMPORT KEY');
    imp.id = 'pc-key-import';
    imp.type = 'button';
    imp.addEventListener('click', () => {
      const text = pem.value;
      pem.value = '';
      importPEM(name.value.trim(), text).then(() => note('')).catch((e) => note('import: ' + e.message, true));
    });
    row.append(name, gen, pem, file, imp);
    keyBox.append(row);
  }

  const STATE_TEXT = { signing: 'SIGNING', sent: 'SENT \u00b7 WAITING FOR THE TABLE', accepted: 'ACCEPTED', refused: 'REFUSED', 'no-reply': 'NO REPLY', error: 'NOT SENT' };
  function drawLog() {
    logList.replaceChildren();
    for (const e of log) {
      const li = el('li', 'pc-' + e.state);
      if (e.cmd) li.dataset.id = e.cmd.id;
      li.dataset.state = e.state;
      const c = e.cmd || e.req;
      let what = c.action + (c.coup ? ' coup ' + c.coup : '') + (c.card ? ' ' + c.card : '');
      if (c.reason) what += ' \u00b7 \u201c' + c.reason + '\u201d';
      li.append(el('span', 'pc-time', e.at.toISOString().slice(11, 23)), el('span', 'pc-what', what), el('b', 'pc-state', STATE_TEXT[e.state] || e.state));
      const r = e.reply;
      if (r) {
        let detail = r.result === 'accepted' ? 'recorded at seq ' + (r.seq || '?') + ' by ' + (r.by || c.supervisor) : (r.code || '') + ': ' + (r.reason || '');
        li.append(el('span', 'pc-reply', detail));
      } else if (e.error) {
        li.append(el('span', 'pc-reply', e.error));
      }
      if (e.cmd) li.append(el('span', 'pc-cid', 'id ' + e.cmd.id.slice(0, 8)));
      logList.append(li);
    }
  }

  // Each alert shows the actions that clear it (app.js draws the list
  // anew on each render; this adds the buttons after it).
  td.hooks.render.push((state) => {
    const alerts = state.alerts && Array.isArray(state.alerts.alerts) ? state.alerts.alerts : [];
    const items = $('alert-list').children;
    for (let i = 0; i < alerts.length && i < items.length; i++) {
      const a = alerts[i];
      const acts = ACTIONS.filter((x) => x.needs && a.needs && x.needs.includes(a.needs));
      if (acts.length === 0) continue;
      const row = el('span', 'pc-clears');
      row.append(el('span', 'pc-clears-label', 'CLEARS IT:'));
      for (const x of acts) {
        const b = el('button', 'pc-small pc-act', x.label + (x.fields.includes('coup') && a.coup ? ' ' + a.coup : ''));
        b.type = 'button';
        b.dataset.action = x.action;
        b.addEventListener('click', () => prepare(x.action, { coup: a.coup || '' }));
        row.append(b);
      }
      items[i].append(row);
    }
  });

  window.pitConsole = { actions: ACTIONS, fields: FIELDS, sign: sign, send: send, prepare: prepare, generate: generate, importPEM: importPEM, signer: () => signer, enrolmentRequest: enrolmentRequest, log: log };
  loadSigner();
})();
