// tokenizers_corpus.mjs: the corpus that tokenizers_hf.sh encodes with HeadSplit and with the
// JavaScript Hugging Face tokenizers.  Deterministic (a seeded generator, no clock): the same
// strings on every run.  JS strings are UTF-16, so invalid UTF-8 cannot be fed; lone
// surrogates stand in for it (both sides then see U+FFFD's bytes, as TextEncoder writes them).
export function corpus() {
  const out = [];
  let seed = 0x5eed1234;
  const rnd = () => { // mulberry32
    seed = (seed + 0x6d2b79f5) | 0;
    let t = seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const pick = (a) => a[Math.floor(rnd() * a.length)];

  const fixed = [
    "", " ", "  ", "\t", "\n", "\r\n", " \n ", "\n\n\n", "a", "Hello, world!",
    "Hello, my dog is cute", "   leading spaces", "trailing spaces   ", "a  b   c    d",
    "tabs\tand\t\ttabs", "line1\nline2\r\nline3\rline4", "  \n\t  \n", "x\u00a0y\u2003z\u3000w",
    "0", "7", "42", "123", "1234", "12345", "1234567890", "3.14159265358979",
    "99,999,999.00", "-17e+12", "0x1F600", "2024-06-01T12:34:56Z", "v1.2.3-rc.4",
    "I'm", "I'M", "you're", "YOU'RE", "we've", "They'LL", "she'd", "it's", "IT'S", "don't",
    "Don'T", "'s", "'t'", "rock'n'roll", "O'Neil's", "l'été", "''quoted''",
    "def f(x):\n    return x ** 2  # square\n", "for (int i = 0; i < n; i++) { a[i] += b[i]; }",
    "if (a && b || !c) return -1;", "const s = `${a}+${b}`;", "<div class=\"x\">&amp;</div>",
    "SELECT * FROM t WHERE id = 42;", "#include <stdio.h>\nint main(void){puts(\"hi\");}",
    "   indented\n\tcode\n        block", "x=>x*2", "a_b_c __init__ CamelCaseName",
    "https://example.com/path?q=1&r=2#frag", "user@example.org", "C:\\Windows\\System32",
    "你好，世界！", "日本語のテキストです。", "한국어 문장입니다.", "中文123数字", "漢字かなカナ",
    "😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "👩🏾‍💻 codes", "🇫🇷🇯🇵", "❤️", "1️⃣", "emoji😀in😀text",
    "e\u0301", "e\u0301 x", "\u00e9", "a\u0323\u0307", "a\u0307\u0323", "\u1e0b\u0323",
    "\u1100\u1161\u11a8", "\u0041\u030a", "\u212b", "\u2126", "Zalgo: Z\u0351\u0357\u0353a\u0300l",
    "n\u0303o\u0308", "\u0958", "\ufb2c", "\u0f73", "Ω ohm \u2126", "ﬁ ligature", "ｆｕｌｌｗｉｄｔｈ",
    "مرحبا بالعالم", "שלום עולם", "עִבְרִית", "العربية ١٢٣", "Ελληνικά", "Русский текст",
    "हिन्दी", "ไทย", "Tiếng Việt", "a\u200bb", "a\u200db", "\ufeffbom",
    "<|begin_of_text|>", "<|end_of_text|>", "<|begin_of_text|>Hello", "x<|eot_id|>y",
    "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>", "<|im_start|>",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n", "<|endoftext|>", "<think>hmm</think>",
    "<|im_start|><|im_end|>", "<|begin_of_text|><|begin_of_text|>", "<|im_start", "|im_start|>",
    "<|reserved_special_token_5|>", " <|im_end|> ", "<s>", "</s>", "<unk>",
    "a\ud800b", "\udc00", "x\ud83dy", "\ud83d\ude00\ud800", "lone \udfff end",
  ];
  out.push(...fixed);

  const words = ["the", "The", "THE", "quick", "brown", "fox", "jumps", "over", "lazy", "dog",
    "naïve", "café", "Straße", "ÆØÅ", "isn't", "WE'RE", "hello", "world", "tokenizer", "x",
    "日本", "中文", "한국", "😀", "👨‍👩‍👧", "مرحبا", "שלום", "e\u0301", "a\u0308", "Ω", "ß", "İ",
    "12", "345", "6789", "007", "3.5", "1e9", "$100", "50%", "#1", "@user", "foo_bar", "fooBar",
    "<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|eot_id|>", "\ud800", "'s", "'Ll",
    "...", "!!!", "?!", "--", "()", "[]", "{}", ";", "::", "->", "=>", "&&", "||", "/*", "*/"];
  const seps = [" ", " ", " ", "  ", "   ", "\t", "\n", "\n\n", " \n", "\r\n", "", ",", ". ",
    "\u00a0", "\u3000", "    ", "\t\t"];
  while (out.length < 560) {
    const n = 1 + Math.floor(rnd() * 12);
    let s = rnd() < 0.2 ? pick(seps) : "";
    for (let i = 0; i < n; i++)
      s += (i ? pick(seps) : "") + pick(words);
    if (rnd() < 0.2)
      s += pick(seps);
    if (rnd() < 0.1)
      s += String(Math.floor(rnd() * 1e12));
    out.push(s);
  }
  // long inputs: a long number, a long whitespace run, a long word, repeated text
  out.push("9".repeat(200), " ".repeat(100) + "x", "\n".repeat(50), "a".repeat(300),
    "ab".repeat(150), "😀".repeat(40), "na".repeat(60) + " batman");
  return out;
}
