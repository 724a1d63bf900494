/* serve_openai.c: OpenAI's request bodies into jobs and jobs into its reply bodies.
 *
 * Chat messages take content as a string or an array of {type:"text", text} parts (joined
 * with newlines, as llama-server joins them); "developer" is "system".  What this server
 * cannot do is refused with a 400 that names it, never ignored: n > 1, best_of, logprobs,
 * response_format other than text, tools and tool calls, non-text parts, echo, suffix,
 * logit_bias.  presence_penalty and frequency_penalty are applied as llama-server applies
 * them (sampler_penalize_counts, over --repeat-last-n tokens).  Without a temperature a
 * request samples at --temperature when the command line gives one, else at 0.8, the
 * default of llama-server (common.h: temp = 0.80f).  max_tokens is capped to what the
 * context leaves; a prompt that leaves nothing is refused with OpenAI's
 * context_length_exceeded. */
#include "serve.h"

#include "util.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* llama-server's default temperature when neither the request nor --temperature gives one */
#define SERVE_DEFAULT_TEMPERATURE 0.8f

/* Reads a number field in [lo, hi] when present: 0, 1 absent, -1 bad (e written). */
static int field_num(json_t *o, const char *key, double lo, double hi, double *out,
                     ServeError *e)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return 1;
    if (!json_is_number(v) || !(json_number_value(v) >= lo && json_number_value(v) <= hi)) {
        serve_error(e, 400, "invalid_request_error", "'%s' must be a number in %g..%g", key,
                    lo, hi);
        e->param = key;
        return -1;
    }
    *out = json_number_value(v);
    return 0;
}

/* 400 naming a field this server does not implement. */
static int refuse(ServeError *e, const char *param, const char *what)
{
    serve_error(e, 400, "invalid_request_error", "%s", what);
    e->param = param;
    e->code = "unsupported_parameter";
    return -1;
}

/* Fields with a meaning this server does not implement: refused unless at their default. */
static int refuse_unsupported(json_t *req, int chat, ServeError *e)
{
    json_t *v;
    if ((v = json_object_get(req, "n")) && !json_is_null(v) &&
        !(json_is_number(v) && json_number_value(v) == 1))
        return refuse(e, "n", "'n' must be 1: this server generates one choice per request");
    if ((v = json_object_get(req, "best_of")) && !json_is_null(v) &&
        !(json_is_number(v) && json_number_value(v) == 1))
        return refuse(e, "best_of", "'best_of' must be 1: one choice per request");
    if ((v = json_object_get(req, "logprobs")) && !json_is_null(v) && !json_is_false(v))
        return refuse(e, "logprobs", "'logprobs' is not supported by this server");
    if ((v = json_object_get(req, "top_logprobs")) && !json_is_null(v) &&
        !(json_is_number(v) && json_number_value(v) == 0))
        return refuse(e, "top_logprobs", "'top_logprobs' is not supported by this server");
    if ((v = json_object_get(req, "response_format")) && !json_is_null(v)) {
        json_t *t = json_object_get(v, "type");
        if (!json_is_string(t) || strcmp(json_string_value(t), "text") != 0)
            return refuse(e, "response_format", "'response_format' other than {\"type\": "
                          "\"text\"} is not supported (no JSON mode or schemas)");
    }
    if (((v = json_object_get(req, "tools")) && !json_is_null(v) &&
         !(json_is_array(v) && json_array_size(v) == 0)) ||
        ((v = json_object_get(req, "functions")) && !json_is_null(v) &&
         !(json_is_array(v) && json_array_size(v) == 0)))
        return refuse(e, json_object_get(req, "tools") ? "tools" : "functions",
                      "tool calls are not supported by this server ('tools'/'functions')");
    const char *choice_keys[] = {"tool_choice", "function_call"};
    for (int i = 0; i < 2; i++) {
        v = json_object_get(req, choice_keys[i]);
        if (v && !json_is_null(v) &&
            !(json_is_string(v) && (!strcmp(json_string_value(v), "none") ||
                                    !strcmp(json_string_value(v), "auto"))))
            return refuse(e, choice_keys[i], "tool calls are not supported by this server");
    }
    if ((v = json_object_get(req, "logit_bias")) && !json_is_null(v) &&
        !(json_is_object(v) && json_object_size(v) == 0))
        return refuse(e, "logit_bias", "'logit_bias' is not supported by this server");
    if ((v = json_object_get(req, "audio")) && !json_is_null(v))
        return refuse(e, "audio", "audio output is not supported (text only)");
    if ((v = json_object_get(req, "modalities")) && !json_is_null(v)) {
        json_t *m0 = json_array_get(v, 0);
        if (!json_is_array(v) || json_array_size(v) != 1 || !json_is_string(m0) ||
            strcmp(json_string_value(m0), "text") != 0)
            return refuse(e, "modalities", "'modalities' other than [\"text\"] is not "
                          "supported (text only)");
    }
    if (!chat) {
        if ((v = json_object_get(req, "echo")) && json_is_true(v))
            return refuse(e, "echo", "'echo' is not supported by this server");
        if ((v = json_object_get(req, "suffix")) && !json_is_null(v) &&
            !(json_is_string(v) && json_string_length(v) == 0))
            return refuse(e, "suffix", "'suffix' (insertion) is not supported by this server");
    }
    return 0;
}

/* Sampling, length, stream and stop fields into the job; 0 or -1 with e. */
static int job_options(Server *sv, Job *j, json_t *req, ServeError *e)
{
    Run *run = sv->run;
    session_gen_options(run, &j->g);
    j->g.steps = 0;
    double v;
    int rc;
    const double big = 2147483647.0;
    if ((rc = field_num(req, "max_tokens", 1, big, &v, e)) < 0 ||
        (rc == 1 && (rc = field_num(req, "max_completion_tokens", 1, big, &v, e)) < 0))
        return -1;
    j->g.n_predict = rc == 0 ? (int)v : run->o.n_predict ? run->o.n_predict : 256;
    j->g.temperature = run->o.temperature_set ? run->o.temperature : SERVE_DEFAULT_TEMPERATURE;
    if ((rc = field_num(req, "temperature", 0, 100, &v, e)) < 0)
        return -1;
    if (rc == 0)
        j->g.temperature = (float)v;
    if ((rc = field_num(req, "top_p", 0, 1, &v, e)) < 0)
        return -1;
    if (rc == 0)
        j->g.top_p = v > 0 ? (float)v : 1.0f;
    if ((rc = field_num(req, "top_k", 0, 1 << 24, &v, e)) < 0)
        return -1;
    if (rc == 0)
        j->g.top_k = (int)v;
    if ((rc = field_num(req, "min_p", 0, 1, &v, e)) < 0)
        return -1;
    if (rc == 0)
        j->g.min_p = (float)v;
    if ((rc = field_num(req, "repeat_penalty", 0.01, 100, &v, e)) < 0)
        return -1;
    if (rc == 0)
        j->g.repeat_penalty = (float)v;
    if ((rc = field_num(req, "presence_penalty", -2, 2, &v, e)) < 0)
        return -1;
    if (rc == 0)
        j->g.presence_penalty = (float)v;
    if ((rc = field_num(req, "frequency_penalty", -2, 2, &v, e)) < 0)
        return -1;
    if (rc == 0)
        j->g.frequency_penalty = (float)v;
    if ((rc = field_num(req, "seed", 0, 9007199254740991.0, &v, e)) < 0)
        return -1;
    if (rc == 0)
        j->g.seed = (uint64_t)v;
    json_t *st = json_object_get(req, "stream");
    if (st && !json_is_null(st) && !json_is_boolean(st)) {
        serve_error(e, 400, "invalid_request_error", "'stream' must be true or false");
        e->param = "stream";
        return -1;
    }
    j->stream = json_is_true(st);
    json_t *so = json_object_get(req, "stream_options");
    if (so && !json_is_null(so)) {
        json_t *iu = json_object_get(so, "include_usage");
        if (!json_is_object(so) || (iu && !json_is_null(iu) && !json_is_boolean(iu))) {
            serve_error(e, 400, "invalid_request_error", "'stream_options' must be an object "
                        "such as {\"include_usage\": true}");
            e->param = "stream_options";
            return -1;
        }
        j->include_usage = j->stream && json_is_true(iu);
    }
    /* stop strings: the request's (a string or up to 4 strings), the template's end of turn
     * for chat, and the command line's */
    int n = 0;
    json_t *stop = json_object_get(req, "stop");
    if (json_is_string(stop)) {
        j->stops[n++] = xstrdup(json_string_value(stop));
    } else if (json_is_array(stop)) {
        size_t i;
        json_t *s;
        json_array_foreach(stop, i, s) {
            if (!json_is_string(s) || i >= 4 || !json_string_length(s)) {
                serve_error(e, 400, "invalid_request_error",
                            "'stop' must be a string or up to 4 non-empty strings");
                e->param = "stop";
                return -1;
            }
            j->stops[n++] = xstrdup(json_string_value(s));
        }
    } else if (stop && !json_is_null(stop)) {
        serve_error(e, 400, "invalid_request_error",
                    "'stop' must be a string or an array of strings");
        e->param = "stop";
        return -1;
    }
    if (j->chat && run->tmpl_stop)
        j->stops[n++] = xstrdup(run->tmpl_stop);
    for (int i = 0; i < run->o.n_stops && n < SERVE_STOPS; i++)
        j->stops[n++] = xstrdup(run->o.stops[i]);
    for (int i = 0; i < n; i++)
        j->stop_ptrs[i] = j->stops[i];
    j->g.stops = j->stop_ptrs;
    j->g.n_stops = n;
    return 0;
}

/* A message's content: a string, or text parts joined with newlines (malloc'ed into *out).
 * 0, or -1 with e naming the message and part. */
static int message_content(json_t *content, size_t i, char **out, ServeError *e)
{
    if (json_is_string(content)) {
        *out = xstrdup(json_string_value(content));
        return 0;
    }
    if (!json_is_array(content)) {
        serve_error(e, 400, "invalid_request_error", "messages[%zu] needs 'content': a string "
                    "or an array of {\"type\": \"text\", \"text\": ...} parts", i);
        e->param = "messages";
        return -1;
    }
    size_t len = 0, k;
    json_t *part;
    json_array_foreach(content, k, part) {
        json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_string(type) || strcmp(json_string_value(type), "text") != 0) {
            serve_error(e, 400, "invalid_request_error", "messages[%zu].content[%zu]: %s%s%s "
                        "parts are not supported (text only)", i, k,
                        json_is_string(type) ? "'" : "untyped",
                        json_is_string(type) ? json_string_value(type) : "",
                        json_is_string(type) ? "'" : "");
            e->param = "messages";
            return -1;
        }
        if (!json_is_string(text)) {
            serve_error(e, 400, "invalid_request_error",
                        "messages[%zu].content[%zu]: a text part needs a string 'text'", i, k);
            e->param = "messages";
            return -1;
        }
        len += json_string_length(text) + 1;
    }
    char *s = xmalloc(len + 1), *p = s;
    json_array_foreach(content, k, part) {
        json_t *text = json_object_get(part, "text");
        if (k)
            *p++ = '\n';
        memcpy(p, json_string_value(text), json_string_length(text));
        p += json_string_length(text);
    }
    *p = '\0';
    *out = s;
    return 0;
}

/* The prompt of a chat request: its messages rendered by the template; 0 or -1 with e. */
static int job_chat_prompt(Server *sv, Job *j, json_t *req, ServeError *e)
{
    if (!sv->run->have_tmpl) {
        serve_error(e, 400, "invalid_request_error", "%s has no chat template stored with it: "
                    "start the server with --chat-template NAME for chat completions "
                    "(/v1/completions needs none)", sv->model_id);
        e->param = "messages";
        return -1;
    }
    json_t *ms = json_object_get(req, "messages");
    if (!json_is_array(ms) || json_array_size(ms) == 0) {
        serve_error(e, 400, "invalid_request_error", "'messages' must be a non-empty array");
        e->param = "messages";
        return -1;
    }
    size_t n = json_array_size(ms);
    ChatMessage *cm = xcalloc(n, sizeof *cm);
    char **texts = xcalloc(n, sizeof *texts);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        json_t *m = json_array_get(ms, i);
        json_t *role = json_object_get(m, "role"), *calls = json_object_get(m, "tool_calls");
        const char *r = json_is_string(role) ? json_string_value(role) : NULL;
        if (!r) {
            serve_error(e, 400, "invalid_request_error", "messages[%zu] needs a string 'role'",
                        i);
            rc = -1;
        } else if (!strcmp(r, "tool") || !strcmp(r, "function") ||
                   (calls && !json_is_null(calls) &&
                    !(json_is_array(calls) && json_array_size(calls) == 0)) ||
                   (json_object_get(m, "function_call") &&
                    !json_is_null(json_object_get(m, "function_call")))) {
            serve_error(e, 400, "invalid_request_error", "messages[%zu]: tool calls are not "
                        "supported by this server", i);
            rc = -1;
        } else if (strcmp(r, "system") && strcmp(r, "developer") && strcmp(r, "user") &&
                   strcmp(r, "assistant")) {
            serve_error(e, 400, "invalid_request_error", "messages[%zu]: role '%s' is not "
                        "system, developer, user or assistant", i, r);
            rc = -1;
        } else {
            rc = message_content(json_object_get(m, "content"), i, &texts[i], e);
            cm[i] = (ChatMessage){!strcmp(r, "developer") ? "system" : r, texts[i]};
        }
        if (rc < 0)
            e->param = "messages";
    }
    if (rc == 0) {
        char err[256] = "";
        j->prompt = chat_format(sv->run->tmpl, cm, (int)n, 1, err, sizeof err);
        if (!j->prompt) {
            serve_error(e, 400, "invalid_request_error", "%s", err);
            e->param = "messages";
            rc = -1;
        }
    }
    for (size_t i = 0; i < n; i++)
        free(texts[i]);
    free(texts);
    free(cm);
    return rc;
}

/* The prompt of a completion request: a string or an array of one; 0 or -1 with e. */
static int job_text_prompt(Job *j, json_t *req, ServeError *e)
{
    json_t *p = json_object_get(req, "prompt");
    if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0)))
        p = json_array_get(p, 0);
    if (json_is_string(p)) {
        j->prompt = xstrdup(json_string_value(p));
        return 0;
    }
    json_t *first = json_array_get(p, 0);
    if (json_is_array(p) && (json_is_integer(first) || json_is_array(first)))
        serve_error(e, 400, "invalid_request_error",
                    "'prompt' as token ids is not supported: send the text");
    else
        serve_error(e, 400, "invalid_request_error", "'prompt' must be a string or an array "
                    "of one string (one completion per request)");
    e->param = "prompt";
    return -1;
}

/* Counts the prompt's tokens (encoded as the generation will encode it) and caps the new
 * tokens to what the context leaves: 0, or -1 with e (context_length_exceeded). */
static int job_fit(Server *sv, Job *j, ServeError *e)
{
    Run *run = sv->run;
    int *ids = NULL;
    size_t n = 0;
    char err[256] = "";
    size_t len = strlen(j->prompt);
    int rc = j->g.special ? tokenizer_encode_special(run->tok, j->prompt, len, &ids, &n, err,
                                                     sizeof err)
                          : tokenizer_encode(run->tok, j->prompt, len, &ids, &n, err, sizeof err);
    free(ids);
    const char *what = j->chat ? "messages" : "prompt";
    if (rc < 0 || n == 0) {
        serve_error(e, 400, "invalid_request_error", "%s", rc < 0 ? err
                    : "the prompt encodes to no tokens");
        e->param = what;
        return -1;
    }
    if ((long)n >= run->kv_cap) {
        serve_error(e, 400, "invalid_request_error", "This model's maximum context length is "
                    "%d tokens. However, your %s resulted in %zu tokens, which leave no room "
                    "for a reply. Please reduce the length of the %s.", run->kv_cap, what, n,
                    what);
        e->param = what;
        e->code = "context_length_exceeded";
        return -1;
    }
    int room = run->kv_cap - (int)n;
    if (j->g.n_predict > room)
        j->g.n_predict = room;
    return 0;
}

int openai_job_parse(Server *sv, Job *j, json_t *req, ServeError *e)
{
    if (refuse_unsupported(req, j->chat, e) < 0 || job_options(sv, j, req, e) < 0 ||
        (j->chat ? job_chat_prompt(sv, j, req, e) : job_text_prompt(j, req, e)) < 0 ||
        job_fit(sv, j, e) < 0)
        return -1;
    pthread_mutex_lock(&sv->mu);
    unsigned long id = ++sv->n_ids;
    pthread_mutex_unlock(&sv->mu);
    snprintf(j->id, sizeof j->id, "%s-hs%lu", j->chat ? "chatcmpl" : "cmpl", id);
    j->created = (long long)time(NULL);
    return 0;
}

/* The fields every reply object opens with. */
static json_t *reply_head(const Job *j, const char *object)
{
    return json_pack("{s:s,s:s,s:I,s:s}", "id", j->id, "object", object, "created",
                     (json_int_t)j->created, "model", j->sv->model_id);
}

static json_t *usage_json(const Job *j)
{
    return json_pack("{s:i,s:i,s:i}", "prompt_tokens", j->n_prompt, "completion_tokens",
                     j->n_gen, "total_tokens", j->n_prompt + j->n_gen);
}

json_t *openai_chunk(const Job *j, const char *text, size_t n, const char *finish)
{
    json_t *choice = json_object();
    json_object_set_new(choice, "index", json_integer(0));
    if (j->chat) {
        json_t *delta = json_object();
        if (!j->started)
            json_object_set_new(delta, "role", json_string("assistant"));
        if (text)
            json_object_set_new(delta, "content", json_stringn(text, n));
        json_object_set_new(choice, "delta", delta);
    } else {
        json_object_set_new(choice, "text", json_stringn(text ? text : "", text ? n : 0));
    }
    json_object_set_new(choice, "finish_reason", finish ? json_string(finish) : json_null());
    json_t *o = reply_head(j, j->chat ? "chat.completion.chunk" : "text_completion");
    json_t *choices = json_array();
    json_array_append_new(choices, choice);
    json_object_set_new(o, "choices", choices);
    if (j->include_usage) /* OpenAI: null on every chunk but the last */
        json_object_set_new(o, "usage", json_null());
    return o;
}

json_t *openai_usage_chunk(const Job *j)
{
    json_t *o = reply_head(j, j->chat ? "chat.completion.chunk" : "text_completion");
    json_object_set_new(o, "choices", json_array());
    json_object_set_new(o, "usage", usage_json(j));
    return o;
}

json_t *openai_reply(const Job *j)
{
    json_t *choice = j->chat ? json_pack("{s:i,s:{s:s,s:s},s:s}", "index", 0, "message",
                                         "role", "assistant", "content", j->text,
                                         "finish_reason", j->finish)
                             : json_pack("{s:i,s:s,s:s}", "index", 0, "text", j->text,
                                         "finish_reason", j->finish);
    if (!choice)
        return NULL;
    json_t *o = reply_head(j, j->chat ? "chat.completion" : "text_completion");
    json_object_set_new(o, "choices", json_pack("[o]", choice));
    json_object_set_new(o, "usage", usage_json(j));
    return o;
}

json_t *openai_error_json(const ServeError *e)
{
    json_t *err = json_pack("{s:s,s:s}", "message", e->msg, "type", e->type);
    if (!err) /* a message that is not UTF-8 (text from the request) */
        err = json_pack("{s:s,s:s}", "message", "invalid request", "type", e->type);
    json_object_set_new(err, "param", e->param ? json_string(e->param) : json_null());
    json_object_set_new(err, "code", e->code ? json_string(e->code) : json_null());
    return json_pack("{s:o}", "error", err);
}
