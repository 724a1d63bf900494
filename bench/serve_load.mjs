// bench/serve_load.mjs: N concurrent streamed completions against a --serve server, with the
// official openai client, as the users' programs send them.  Every client sends the same
// request (temperature 0, max_tokens, stream with include_usage) at the same moment; the
// script prints one JSON line with, per client, the time to its first token, the gaps between
// its tokens, its generated tokens (the server's usage) and when it finished, and for the
// round the aggregate generated tokens per second (all clients' tokens over the time from the
// first send to the last [DONE]).
//
//   node bench/serve_load.mjs OPENAI_INDEX_MJS URL CLIENTS MAX_TOKENS PROMPT
//
// OPENAI_INDEX_MJS: the openai package's index.mjs (tests/node's, scripts/install-deps.sh).
const [openaiPath, url, clientsArg, maxArg, prompt] = process.argv.slice(2);
if (!openaiPath || !url || !clientsArg || !maxArg || prompt === undefined) {
  console.error("usage: node serve_load.mjs OPENAI_INDEX_MJS URL CLIENTS MAX_TOKENS PROMPT");
  process.exit(2);
}
const clients = Number(clientsArg), maxTokens = Number(maxArg);
if (!(clients >= 1) || !(maxTokens >= 1)) {
  console.error(`serve_load.mjs: CLIENTS (${clientsArg}) and MAX_TOKENS (${maxArg}) must be positive`);
  process.exit(2);
}
const { default: OpenAI } = await import(openaiPath);
const api = new OpenAI({ baseURL: `${url}/v1`, apiKey: "none", maxRetries: 0, timeout: 3600e3 });
const now = () => Number(process.hrtime.bigint()) / 1e9;

async function one(t0) {
  const r = { ttft_s: null, gaps_s: [], tokens: 0, chunks: 0, done_s: null, text: "" };
  const stream = await api.completions.create({
    model: "m", prompt, max_tokens: maxTokens, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let last = null;
  for await (const chunk of stream) {
    if (chunk.usage) r.tokens = chunk.usage.completion_tokens;
    const text = chunk.choices?.[0]?.text;
    if (!text) continue;
    const t = now();
    if (last === null) r.ttft_s = t - t0;
    else r.gaps_s.push(t - last);
    last = t;
    r.chunks++;
    r.text += text;
  }
  r.done_s = now() - t0;
  return r;
}

const t0 = now();
const results = await Promise.all(Array.from({ length: clients }, () => one(t0)));
const wall = Math.max(...results.map((r) => r.done_s));
const tokens = results.reduce((s, r) => s + r.tokens, 0);
console.log(JSON.stringify({
  clients, max_tokens: maxTokens, wall_s: wall, tokens,
  aggregate_tokens_per_s: tokens / wall,
  per_client: results.map(({ text, ...r }) => ({ ...r, text_chars: text.length })),
  texts_equal: results.every((r) => r.text === results[0].text),
}));
