/* serve_http.c: the HTTP side of --serve on libmicrohttpd (a thread per connection): the
 * listening address (IPv4 ADDR:PORT or [IPv6]:PORT), the routes, the Bearer key, request
 * bodies, and the replies: JSON, OpenAI errors, server-sent events as a job produces them.
 * libmicrohttpd's own messages go through the project's logger.  Every wait here is timed
 * and gives up once the server has stopped, so that stopping the daemon (which joins these
 * threads) cannot hang. */
#include "serve.h"

#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct {
    char *body;
    size_t len, cap;
    int too_big;
} Req;

/* libmicrohttpd's messages, one log line each. */
static void http_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\r\n")] = '\0';
    LOG_INFO("headsplit: libmicrohttpd: %s", line);
}

/* Queues a response, with the headers every reply carries. */
static enum MHD_Result queue(Server *sv, struct MHD_Connection *c, unsigned status,
                             struct MHD_Response *r, int retry_after)
{
    if (retry_after > 0) {
        char s[16];
        snprintf(s, sizeof s, "%d", retry_after);
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, s);
    }
    if (serve_draining(sv)) /* keep-alive clients go elsewhere */
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result reply_text(Server *sv, struct MHD_Connection *c, unsigned status,
                                  char *s, const char *type, int retry_after)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    return queue(sv, c, status, r, retry_after);
}

static enum MHD_Result reply_json(Server *sv, struct MHD_Connection *c, unsigned status,
                                  json_t *o, int retry_after)
{
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s)
        return MHD_NO;
    return reply_text(sv, c, status, s, "application/json", retry_after);
}

static enum MHD_Result reply_error(Server *sv, struct MHD_Connection *c, const ServeError *e)
{
    if (e->status >= 400 && e->status < 500) {
        pthread_mutex_lock(&sv->mu);
        sv->st.bad++;
        pthread_mutex_unlock(&sv->mu);
    }
    return reply_json(sv, c, e->status, openai_error_json(e), e->retry_after);
}

/* Whether the client of connection c has closed it (a zero-byte peek). */
static int client_gone(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return 0;
    char b;
    ssize_t r = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* 1 once the controller has stopped (a wait that is still going on gives up). */
static int server_stopped(Server *sv)
{
    pthread_mutex_lock(&sv->mu);
    int s = sv->stopped;
    pthread_mutex_unlock(&sv->mu);
    return s;
}

/* Streaming body: waits (this connection's own thread) until bytes or the end come; gives up
 * when the client has gone (a queued job is then dropped before it runs) or the server has
 * stopped. */
static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    Job *j = cls;
    pthread_mutex_lock(&j->mu);
    while (j->out_read == j->out_len && !j->done) {
        serve_wait_ms(&j->cv, &j->mu, 100);
        if (j->out_read == j->out_len && !j->done) {
            pthread_mutex_unlock(&j->mu);
            int stop = server_stopped(j->sv) || client_gone(j->conn);
            pthread_mutex_lock(&j->mu);
            if (stop) {
                pthread_mutex_unlock(&j->mu);
                return MHD_CONTENT_READER_END_WITH_ERROR; /* stream_free cancels the job */
            }
        }
    }
    ssize_t n;
    if (j->out_read < j->out_len) {
        size_t k = j->out_len - j->out_read < max ? j->out_len - j->out_read : max;
        memcpy(buf, j->out + j->out_read, k);
        j->out_read += k;
        n = (ssize_t)k;
    } else {
        n = j->failed ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
    }
    pthread_mutex_unlock(&j->mu);
    return n;
}

/* The streamed response is done with (sent, or the client went away). */
static void stream_free(void *cls)
{
    Job *j = cls;
    pthread_mutex_lock(&j->mu);
    if (!j->done)
        __atomic_store_n(&j->cancelled, 1, __ATOMIC_RELAXED); /* read unlocked: generate_run */
    pthread_mutex_unlock(&j->mu);
    serve_job_release(j);
}

static enum MHD_Result reply_job(Server *sv, struct MHD_Connection *c, Job *j)
{
    if (j->stream) {
        j->conn = c;
        struct MHD_Response *r =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_reader, j,
                                              stream_free);
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        return queue(sv, c, MHD_HTTP_OK, r, 0);
    }
    /* Wait for the whole reply, watching for the client's departure (and, never needed
     * while every queued job is answered, for a stopped server). */
    pthread_mutex_lock(&j->mu);
    while (!j->done) {
        serve_wait_ms(&j->cv, &j->mu, 100);
        if (!j->done && client_gone(c))
            __atomic_store_n(&j->cancelled, 1, __ATOMIC_RELAXED); /* read unlocked: generate_run */
        if (!j->done) {
            pthread_mutex_unlock(&j->mu);
            int stopped = server_stopped(sv);
            pthread_mutex_lock(&j->mu);
            if (stopped && !j->done) {
                j->shutdown = 1;
                snprintf(j->err, sizeof j->err, "the server stopped");
                break;
            }
        }
    }
    pthread_mutex_unlock(&j->mu);
    enum MHD_Result ok;
    ServeError e;
    if (j->shutdown) {
        serve_error(&e, 503, "unavailable_error", "%s", j->err);
        e.retry_after = 5;
        ok = reply_json(sv, c, e.status, openai_error_json(&e), e.retry_after);
    } else if (j->failed) {
        serve_error(&e, 500, "server_error", "%s", j->err);
        ok = reply_error(sv, c, &e);
    } else {
        json_t *o = openai_reply(j);
        serve_error(&e, 500, "server_error", "the reply is not valid UTF-8");
        ok = o ? reply_json(sv, c, MHD_HTTP_OK, o, 0) : reply_error(sv, c, &e);
    }
    serve_job_release(j);
    return ok;
}

/* The request body as a JSON object: 0 with *out, or -1 with e. */
static int body_json(Server *sv, const Req *rq, json_t **out, ServeError *e)
{
    if (rq->too_big) {
        serve_error(e, 413, "invalid_request_error", "request body larger than %ld bytes",
                    sv->max_body);
        return -1;
    }
    json_error_t je;
    json_t *req = json_loadb(rq->body ? rq->body : "", rq->len, 0, &je);
    if (!req) {
        serve_error(e, 400, "invalid_request_error", "malformed JSON: %s (line %d, column %d)",
                    je.text, je.line, je.column);
        return -1;
    }
    if (!json_is_object(req)) {
        json_decref(req);
        serve_error(e, 400, "invalid_request_error", "the body must be a JSON object");
        return -1;
    }
    *out = req;
    return 0;
}

/* A completion request: parsed, checked, queued, answered. */
static enum MHD_Result handle_completion(Server *sv, struct MHD_Connection *c, Req *rq, int chat)
{
    ServeError e;
    json_t *req;
    if (body_json(sv, rq, &req, &e) < 0)
        return reply_error(sv, c, &e);
    Job *j = serve_job_new(sv, chat);
    int bad = openai_job_parse(sv, j, req, &e) < 0;
    json_decref(req);
    if (bad || serve_queue_push(sv, j, &e) < 0) {
        serve_job_release(j);
        return bad ? reply_error(sv, c, &e)
                   : reply_json(sv, c, e.status, openai_error_json(&e), e.retry_after);
    }
    return reply_job(sv, c, j);
}

/* /tokenize, /detokenize: a JSON body in, a JSON body out. */
static enum MHD_Result handle_tokens(Server *sv, struct MHD_Connection *c, Req *rq,
                                     int (*fn)(Server *, json_t *, json_t **, ServeError *))
{
    ServeError e;
    json_t *req, *out = NULL;
    if (body_json(sv, rq, &req, &e) < 0)
        return reply_error(sv, c, &e);
    int rc = fn(sv, req, &out, &e);
    json_decref(req);
    return rc < 0 ? reply_error(sv, c, &e) : reply_json(sv, c, MHD_HTTP_OK, out, 0);
}

/* Bearer authentication: 1 when allowed. */
static int authorised(Server *sv, struct MHD_Connection *c)
{
    if (!sv->api_key)
        return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    return h && strncmp(h, "Bearer ", 7) == 0 && strcmp(h + 7, sv->api_key) == 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    Server *sv = cls;
    Req *rq = *con_cls;
    if (!rq) {
        *con_cls = xcalloc(1, sizeof(Req));
        pthread_mutex_lock(&sv->mu);
        sv->in_flight++;
        sv->st.http++;
        pthread_mutex_unlock(&sv->mu);
        return MHD_YES;
    }
    if (*upload_size) { /* body bytes, kept up to the limit */
        if (rq->len + *upload_size > (size_t)sv->max_body) {
            rq->too_big = 1;
        } else if (!rq->too_big) {
            if (rq->len + *upload_size + 1 > rq->cap) {
                rq->cap = (rq->len + *upload_size + 1) * 2;
                rq->body = xrealloc(rq->body, rq->cap);
            }
            memcpy(rq->body + rq->len, upload, *upload_size);
            rq->len += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    int is_get = strcmp(method, "GET") == 0, is_post = strcmp(method, "POST") == 0;
    ServeError e;
    if (strcmp(url, "/health") == 0 && is_get) {
        pthread_mutex_lock(&sv->mu);
        int q = sv->n_queued, busy = sv->n_running, draining = sv->draining;
        pthread_mutex_unlock(&sv->mu);
        return reply_json(sv, c, draining ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_OK,
                          json_pack("{s:s,s:i,s:i}", "status", draining ? "draining" : "ok",
                                    "queued", q, "busy_slots", busy), 0);
    }
    if (!authorised(sv, c)) {
        serve_error(&e, 401, "invalid_request_error",
                    "invalid or missing API key (Authorization: Bearer KEY)");
        return reply_error(sv, c, &e);
    }
    if (strcmp(url, "/metrics") == 0 && is_get)
        return reply_text(sv, c, MHD_HTTP_OK, serve_metrics_text(sv),
                          "text/plain; version=0.0.4; charset=utf-8", 0);
    if (serve_draining(sv)) {
        serve_error(&e, 503, "unavailable_error", "the server is shutting down");
        e.retry_after = 5;
        return reply_json(sv, c, e.status, openai_error_json(&e), e.retry_after);
    }
    if (strcmp(url, "/v1/models") == 0 && is_get)
        return reply_json(sv, c, MHD_HTTP_OK,
                          json_pack("{s:s,s:[{s:s,s:s,s:i,s:s}]}", "object", "list", "data",
                                    "id", sv->model_id, "object", "model", "created", 0,
                                    "owned_by", "headsplit"), 0);
    int chat = strcmp(url, "/v1/chat/completions") == 0;
    int tok = strcmp(url, "/tokenize") == 0, detok = strcmp(url, "/detokenize") == 0;
    if (chat || tok || detok || strcmp(url, "/v1/completions") == 0) {
        if (!is_post) {
            serve_error(&e, 405, "invalid_request_error", "%s takes POST", url);
            return reply_error(sv, c, &e);
        }
        return tok     ? handle_tokens(sv, c, rq, serve_tokenize)
               : detok ? handle_tokens(sv, c, rq, serve_detokenize)
                       : handle_completion(sv, c, rq, chat);
    }
    serve_error(&e, 404, "invalid_request_error", "no route %s %s", method, url);
    return reply_error(sv, c, &e);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)c;
    (void)toe;
    Server *sv = cls;
    Req *rq = *con_cls;
    if (rq) {
        free(rq->body);
        free(rq);
        *con_cls = NULL;
        pthread_mutex_lock(&sv->mu);
        sv->in_flight--;
        pthread_cond_broadcast(&sv->cv);
        pthread_mutex_unlock(&sv->mu);
    }
}

/* ADDR:PORT or [IPV6]:PORT into a socket address (*v6 set for IPv6); 0 or -1 with err. */
static int parse_addr(const char *spec, struct sockaddr_storage *ss, int *v6, char *err,
                      size_t errlen)
{
    const char *colon = strrchr(spec, ':');
    char host[64];
    if (!colon || (size_t)(colon - spec) >= sizeof host)
        return util_err(err, errlen, "--serve: '%s' is not ADDR:PORT or [IPV6]:PORT", spec);
    memcpy(host, spec, (size_t)(colon - spec));
    host[colon - spec] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (!colon[1] || *end || port < 1 || port > 65535)
        return util_err(err, errlen, "--serve: port '%s' is not 1..65535", colon + 1);
    memset(ss, 0, sizeof *ss);
    size_t hl = strlen(host);
    *v6 = hl >= 2 && host[0] == '[' && host[hl - 1] == ']';
    if (*v6) {
        struct sockaddr_in6 *sa = (struct sockaddr_in6 *)ss;
        host[hl - 1] = '\0';
        sa->sin6_family = AF_INET6;
        sa->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, host + 1, &sa->sin6_addr) != 1)
            return util_err(err, errlen, "--serve: '%s' is not an IPv6 address", host + 1);
        return 0;
    }
    struct sockaddr_in *sa = (struct sockaddr_in *)ss;
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof host, "127.0.0.1");
    if (inet_pton(AF_INET, host[0] ? host : "0.0.0.0", &sa->sin_addr) != 1)
        return util_err(err, errlen, "--serve: '%s' is not an IPv4 address (IPv6: [ADDR]:PORT)",
                        host);
    return 0;
}

int serve_http_start(Server *sv, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    int v6 = 0;
    if (parse_addr(sv->run->o.serve, &ss, &v6, err, errlen) < 0)
        return -1;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_ERROR_LOG | MHD_USE_ITC | (v6 ? MHD_USE_IPv6 : 0);
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, sv, MHD_OPTION_EXTERNAL_LOGGER, http_log, sv,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, sv, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600, MHD_OPTION_END);
    if (!d)
        return util_err(err, errlen, "--serve %s: cannot listen (%s)", sv->run->o.serve,
                        strerror(errno));
    sv->http = d;
    return 0;
}

void serve_http_quiesce(Server *sv)
{
    MHD_socket s = MHD_quiesce_daemon(sv->http);
    if (s != MHD_INVALID_SOCKET)
        close(s); /* new connections are refused, not left in the backlog */
}

void serve_http_stop(Server *sv)
{
    MHD_stop_daemon(sv->http);
    sv->http = NULL;
}
