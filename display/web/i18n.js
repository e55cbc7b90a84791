// Languages of the table display: English (the page's own words), Chinese
// simplified (zh-Hans) and traditional (zh-Hant), for every label, state
// and road name a player reads. A screen picks one with ?lang=, or the
// controller's setting; the pit's own panels stay in English.
'use strict';

window.tableI18n = (function () {
  // Each entry: English, simplified, traditional.
  const WORDS = [
    ['PUNTO BANCO', '百家乐', '百家樂'],
    ['PLAYER', '闲', '閒'], ['BANKER', '庄', '莊'], ['TIE', '和', '和'],
    ['B', '庄', '莊'], ['P', '闲', '閒'], ['T', '和', '和'], ['B?', '庄?', '莊?'], ['P?', '闲?', '閒?'],
    ['BEAD PLATE', '珠盘路', '珠盤路'], ['BIG ROAD', '大路', '大路'], ['BIG EYE BOY', '大眼仔', '大眼仔'],
    ['SMALL ROAD', '小路', '小路'], ['COCKROACH PIG', '曱甴路', '曱甴路'],
    ['BIG EYE', '大眼仔', '大眼仔'], ['SMALL', '小路', '小路'], ['ROACH', '曱甴路', '曱甴路'],
    ['NEXT COUP', '下局问路', '下局問路'], ['SHOE', '牌靴', '牌靴'], ['COUP', '局', '局'], ['DEALER', '荷官', '荷官'],
    ['ROUND', '局号', '局號'], ['B PAIR', '庄对', '莊對'], ['P PAIR', '闲对', '閒對'], ['NATURALS', '例牌', '例牌'],
    ['COUPS', '局数', '局數'], ['DEALT', '已发', '已發'], ['REMAINING', '剩余', '剩餘'],
    ['PLACE YOUR BETS', '请下注', '請下注'], ['NO MORE BETS', '停止下注', '停止下注'], ['DEALING', '发牌中', '發牌中'],
    ['RESULT', '结果', '結果'], ['BURNING CARDS', '烧牌', '燒牌'], ['WAITING FOR A NEW SHOE', '等待新牌靴', '等待新牌靴'],
    ['SHOE OVER', '本靴结束', '本靴結束'], ['AWAITING REVEAL', '等待开牌', '等待開牌'], ['NO BETS', '停止下注', '停止下注'],
    ['GAME PAUSED', '游戏暂停', '遊戲暫停'], ['TABLE OFFLINE', '赌台离线', '賭台離線'], ['NO CONNECTION', '连接中断', '連接中斷'],
    ['TABLE SUSPENDED', '赌台暂停', '賭台暫停'], ['LOADING', '载入中', '載入中'],
    ['TABLE CHECK', '赌台检查', '賭台檢查'], ['CHECKING THE CARDS', '检查牌张', '檢查牌張'],
    ['CHECKING THE SHOE', '检查牌靴', '檢查牌靴'], ['TECHNICAL CHECK', '技术检查', '技術檢查'],
    ['no bets, no cards until the game resumes', '游戏恢复前停止下注及发牌', '遊戲恢復前停止下注及發牌'],
    ['no bets \u00b7 what you see is the table\u2019s last known state', '停止下注 \u00b7 所示为赌台最后状态', '停止下注 \u00b7 所示為賭台最後狀態'],
    ['reconnecting to the table\u2026', '正在重新连接赌台\u2026', '正在重新連接賭台\u2026'],
    ['connecting to the table\u2026', '正在连接赌台\u2026', '正在連接賭台\u2026'],
    ['reading the table\u2019s state\u2026', '正在读取赌台状态\u2026', '正在讀取賭台狀態\u2026'],
    ['BANKER WINS', '庄赢', '莊贏'], ['PLAYER WINS', '闲赢', '閒贏'],
    ['NATURAL', '例牌', '例牌'], ['BANKER PAIR', '庄对', '莊對'], ['PLAYER PAIR', '闲对', '閒對'],
    ['LIVE', '进行中', '進行中'], ['SUSPENDED', '暂停', '暫停'], ['OFFLINE', '离线', '離線'], ['WAITING', '等待', '等待'],
    ['REPLAY', '回放', '回放'], ['CONNECTED', '已连接', '已連接'], ['RECONNECTING', '重新连接', '重新連接'],
    ['CONNECTING', '连接中', '連接中'], ['DISCONNECTED', '已断开', '已斷開'],
    ['CUT CARD OUT', '切牌已出', '切牌已出'], ['LAST COUP', '最后一局', '最後一局'], ['LAST RESULT', '上局结果', '上局結果'],
    ['LIMITS', '限红', '限紅'], ['P/B', '闲/庄', '閒/莊'],
  ];
  const LANGS = { 'zh-Hans': 1, 'zh-Hant': 2 };
  let col = 0;
  const table = new Map(WORDS.map((w) => [w[0], w]));

  // t is a word in the screen's language (the English one when there is
  // no other).
  function t(en) {
    const w = table.get(en);
    return w && col > 0 ? w[col] : en;
  }

  // The page's own labels: each text node's English words, kept so that
  // a change of language starts again from them.
  const originals = new Map();
  function label(root) {
    const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      if (!originals.has(n)) originals.set(n, n.textContent);
      const en = originals.get(n);
      const key = en.trim();
      if (table.has(key)) n.textContent = en.replace(key, t(key));
    }
  }

  // use sets the language ("en", "zh-Hans", "zh-Hant"; anything else is
  // English) and relabels root.
  function use(lang, root) {
    col = LANGS[lang] || 0;
    document.documentElement.lang = col ? lang : 'en';
    if (root) label(root);
  }

  return { t: t, use: use, words: WORDS, languages: ['en', 'zh-Hans', 'zh-Hant'] };
})();
