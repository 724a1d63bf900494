/* serve.h: the pieces of --serve shared by its files: the job a completion request becomes,
 * the server's state, and what each file offers the others.
 *   serve.c         the controller's loop, the queue, the drain on SIGTERM/SIGINT, metrics
 *   serve_http.c    libmicrohttpd: address, routes, keys, streamed and whole replies
 *   serve_openai.c  OpenAI request bodies into jobs, jobs into OpenAI reply bodies
 *   serve_ops.c     /metrics, /tokenize, /detokenize
 *   serve_slots.c   --parallel: the slots' shared passes (one process or several ranks)
 * Lock order: Server.mu before Job.mu, never the other way; the batcher's own lock is taken
 * with neither held. */
#ifndef HEADSPLIT_SERVE_H
#define HEADSPLIT_SERVE_H

#include "headsplit.h"

#include <pthread.h>

#define SERVE_STOPS 8

typedef struct Server Server;
typedef struct Batcher Batcher;

/* A --parallel slot: a thread that runs the requests given it, on KV caches of its own (the
 * layer backend's slot idx), sharing passes with the other slots. */
typedef struct {
    Server *sv;
    int idx;
    char name[24];          /* " in slot N" for the log */
    pthread_t th;
    struct Job *job;        /* the request to run (under Server.mu) */
    int *hist;              /* the token ids its KV caches hold, by position */
    int n_hist, hist_cap;
    unsigned long last_use; /* when it last took a request (the least recently used goes) */
    GenResult res;
    LayerBackend be;
} ServeSlot;

/* Counters of the shared passes (/metrics). */
typedef struct {
    unsigned long passes, shared; /* passes run; of which carried several sequences */
    unsigned long rows, seq_rows; /* rows run; sequences summed over the passes */
    int max_seqs;                 /* the most sequences one pass carried */
    int groups;                   /* pipelined: groups of slots (0: one pass at a time) */
    int in_flight_max;            /* pipelined: the most passes in flight at once */
} BatchStats;

/* An HTTP error in OpenAI's shape ({"error":{message,type,param,code}}). */
typedef struct {
    unsigned status;
    const char *type;  /* "invalid_request_error", "unavailable_error", "server_error" */
    const char *param; /* NULL: null */
    const char *code;  /* NULL: null */
    int retry_after;   /* > 0: a Retry-After header of so many seconds */
    char msg[512];
} ServeError;

typedef struct Job {
    Server *sv;
    /* the request, fixed before it is queued */
    int chat, stream, include_usage;
    char *prompt;               /* the text to continue (chat: the rendered conversation) */
    GenOptions g;
    char *stops[SERVE_STOPS];
    const char *stop_ptrs[SERVE_STOPS + 1];
    char id[48];
    long long created;
    /* the reply, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *out;                  /* SSE bytes written for the client (streaming) */
    size_t out_len, out_cap, out_read;
    char pend[8];               /* an incomplete UTF-8 sequence held back */
    size_t n_pend;
    int started, done, failed, refs;
    int cancelled;              /* the client left, or the shutdown cut the generation */
    int cut;                    /* the shutdown's grace period ended the generation */
    int shutdown;               /* answered by the shutdown before it ran */
    char *text;                 /* whole reply (non-streaming) */
    const char *finish;
    int n_prompt, n_gen;
    char err[512];
    void *conn;                 /* a stream's libmicrohttpd connection (serve_http.c) */
    struct Job *next;
} Job;

/* Counters of /metrics (under Server.mu). */
typedef struct {
    unsigned long http;                        /* every HTTP request */
    unsigned long ok, failed, cancelled, cut;  /* completions run, by how they ended */
    unsigned long bad, full, shutdown;         /* refused: 4xx, queue full, shutting down */
    unsigned long long prompt_tokens, gen_tokens; /* processed prompt tokens, generated */
    double prompt_s, gen_s;                    /* seconds spent on each */
} ServeStats;

struct Server {
    Run *run;
    const char *model_id;   /* --alias, else the model file's base name */
    char *api_key;          /* --api-key or --api-key-file's (NULL: none) */
    long max_body;
    int queue_max;          /* requests waiting at most (--queue) */
    double grace_s;         /* --shutdown-grace */
    int add_bos;            /* the tokenizer puts BOS in front of what it encodes */
    void *http;             /* the libmicrohttpd daemon (serve_http.c) */
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* the queue changed, a request completed, the drain began */
    Job *head, *tail;
    int n_queued;
    int n_slots;            /* generations at once (Run.slots) */
    Job **running;          /* [n_slots] the requests generating (NULL: that slot is free) */
    int n_running;
    ServeSlot *slots;       /* [n_slots] with n_slots > 1: the slot threads */
    Batcher *batcher;       /* with n_slots > 1: their shared passes */
    LayerBackend layers;    /* with n_slots > 1: the backend the batcher drives */
    int copies;             /* --replicas: copies of the layers (slot i on copy i % copies) */
    int slots_quit;         /* the slot threads are to end */
    unsigned long use_clock;
    int in_flight;          /* requests libmicrohttpd is working on */
    int draining;           /* a signal came: accept nothing more */
    double quit_at;         /* when the drain began */
    int stopped;            /* the controller is done: every wait gives up */
    unsigned long n_ids;    /* reply ids handed out */
    ServeStats st;
};

/* serve.c */
/* pthread_cond_timedwait for ms milliseconds (mu held). */
void serve_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int ms);
Job *serve_job_new(Server *sv, int chat);
void serve_job_release(Job *j);
/* Appends bytes, or one server-sent event with the JSON object o (consumed), to the job's
 * output (Job.mu held). */
void serve_job_put(Job *j, const char *s, size_t n);
void serve_job_put_event(Job *j, json_t *o);
/* Queues j for the controller (taking a reference): 0, or -1 with e (503: the queue is
 * full, or the server is shutting down). */
int serve_queue_push(Server *sv, Job *j, ServeError *e);
/* 1 once the drain has begun. */
int serve_draining(Server *sv);
/* Formats e (status, type, message; param and code NULL). */
void serve_error(ServeError *e, unsigned status, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* serve_slots.c */
/* The passes n_slots slots share on the layers be (its forward_rows; cap rows a pass, at
 * most its max_batch; be is copied; where be keeps several calls in flight, max_in_flight > 1
 * on a chain of stages, the slots go in groups whose passes are in flight at once, posted and
 * taken by a thread of the batcher's own); batcher_backend(b, i): slot i's
 * backend, whose rows wait for every generating slot's and run with them (a slot generates
 * from batcher_join, or its first rows, until batcher_leave: its generation has ended and the
 * others step without it). */
Batcher *batcher_new(const LayerBackend *be, const ModelConfig *c, const HeadW *head,
                     int n_slots, int cap);
void batcher_free(Batcher *b);
LayerBackend batcher_backend(Batcher *b, int slot);
void batcher_join(Batcher *b, int slot);
void batcher_leave(Batcher *b, int slot);
/* The layers' rest between busy times (the distributed engine's workers must not wait for a
 * pass longer than their stall timeout): wake(ctx) before the first step after an idle time,
 * rest(ctx) once no slot generates, each by one thread while no step runs. */
void batcher_on_idle(Batcher *b, void (*wake)(void *), void (*rest)(void *), void *ctx);
/* Once every slot has left for good: the layers rested and the batcher's own thread (the
 * pipelined driver) ended; nothing more may be handed in. */
void batcher_quiesce(Batcher *b);
void batcher_stats(Batcher *b, BatchStats *st);

/* serve_http.c */
/* Listens on --serve's address (ADDR:PORT, [IPV6]:PORT): 0, or -1 with err. */
int serve_http_start(Server *sv, char *err, size_t errlen);
/* Stops accepting connections (those open are served on). */
void serve_http_quiesce(Server *sv);
/* Closes every connection and stops the daemon. */
void serve_http_stop(Server *sv);

/* serve_openai.c */
/* Fills j from a /v1/chat/completions (j->chat) or /v1/completions body: sampling, stops,
 * the prompt (checked against the context): 0, or -1 with e (400). */
int openai_job_parse(Server *sv, Job *j, json_t *req, ServeError *e);
/* A streamed chunk: text (NULL: none) and finish reason (NULL: not finished). */
json_t *openai_chunk(const Job *j, const char *text, size_t n, const char *finish);
/* The last chunk of stream_options.include_usage: no choices, the usage. */
json_t *openai_usage_chunk(const Job *j);
/* The whole reply of a finished job (NULL: its text is not UTF-8). */
json_t *openai_reply(const Job *j);
json_t *openai_error_json(const ServeError *e);

/* serve_ops.c */
/* /metrics: Prometheus text (malloc'ed). */
char *serve_metrics_text(Server *sv);
/* /tokenize and /detokenize bodies as llama-server has them: 0 with *out, or -1 with e. */
int serve_tokenize(Server *sv, json_t *req, json_t **out, ServeError *e);
int serve_detokenize(Server *sv, json_t *req, json_t **out, ServeError *e);

#endif
