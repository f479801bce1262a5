/*
layout.h: the model's shape and its parameter layout, split out of train_gpt.c by topic and included by it (it uses
utils.h and the backend's floatX; not a standalone header): the table of parameter tensors (llm.c's file order), the
flat in-memory layout of one rank's share under tensor and pipeline parallelism, the runs that map a logical tensor's
elements to the tensor-parallel ranks' shares, the views of a flat buffer as tensors, and the named model sizes.
*/
#ifndef LAYOUT_H
#define LAYOUT_H

// ----------------------------------------------------------------------------
// Model layout. Parameters live in ONE flat buffer described by a table generated from the X-macro below.
// The in-memory order keeps each layer contiguous: [wte, wpe, layer 0, ..., layer L-1, lnfw, lnfb], so a layer's
// gradients form one bucket for data-parallel reduction. llm.c's file order (each tensor kind stacked across
// layers) is produced by walking the table in file order when loading and saving.

typedef struct {
    int max_seq_len;  // maxT
    int vocab_size;   // V, the real vocabulary
    int padded_vocab_size; // Vp, V rounded up to a multiple of 128
    int num_layers;   // L
    int num_heads;    // NH
    int channels;     // C
} GPTConfig;

enum { TP_NONE = 0, TP_COLUMN, TP_ROW, TP_VOCAB }; // how tensor parallel will split a tensor (for the TP issue)
// How a fresh model initialises a tensor (GPT-2's scheme): N(0, 0.02); N(0, 0.02 / sqrt(2 L)) for the projections
// into the residual stream; ones (LayerNorm weights); zeros (biases).
enum { INIT_NORMAL = 0, INIT_RESIDUAL, INIT_ONES, INIT_ZEROS };

// name, rows, cols, weight decay, tensor-parallel split, init: the per-layer tensors in llm.c's file order
#define GPT_LAYER_PARAMS(X) \
    X(ln1w,     1,     C,     0, TP_NONE,   INIT_ONES)     \
    X(ln1b,     1,     C,     0, TP_NONE,   INIT_ZEROS)    \
    X(qkvw,     3 * C, C,     1, TP_COLUMN, INIT_NORMAL)   \
    X(qkvb,     1,     3 * C, 0, TP_COLUMN, INIT_ZEROS)    \
    X(attprojw, C,     C,     1, TP_ROW,    INIT_RESIDUAL) \
    X(attprojb, 1,     C,     0, TP_NONE,   INIT_ZEROS)    \
    X(ln2w,     1,     C,     0, TP_NONE,   INIT_ONES)     \
    X(ln2b,     1,     C,     0, TP_NONE,   INIT_ZEROS)    \
    X(fcw,      4 * C, C,     1, TP_COLUMN, INIT_NORMAL)   \
    X(fcb,      1,     4 * C, 0, TP_COLUMN, INIT_ZEROS)    \
    X(fcprojw,  C,     4 * C, 1, TP_ROW,    INIT_RESIDUAL) \
    X(fcprojb,  1,     C,     0, TP_NONE,   INIT_ZEROS)

// One layer's tensors, shapes as in the table: parameters (the compute copy, floatX) and their gradients (fp32).
#define X_FIELD(name, rows, cols, decay, tp, init) floatX* name;
typedef struct { GPT_LAYER_PARAMS(X_FIELD) } LayerParams;
#undef X_FIELD
#define X_FIELD(name, rows, cols, decay, tp, init) float* name;
typedef struct { GPT_LAYER_PARAMS(X_FIELD) } LayerGrads;
#undef X_FIELD
#define X_COUNT(name, rows, cols, decay, tp, init) +1
enum { NUM_LAYER_PARAMS = 0 GPT_LAYER_PARAMS(X_COUNT) };
#undef X_COUNT

typedef struct {
    char name[32];
    int layer;          // -1 for wte, wpe, lnfw, lnfb
    int kind;           // index in GPT_LAYER_PARAMS for layer tensors; -1 otherwise
    size_t rows, cols;
    size_t offset;      // in the flat in-memory layout
    int decay;
    int tp_split;
    int init;           // INIT_*
    // tensor parallelism (--tp): rows, cols and offset above are this rank's slice in its local flat layout; the
    // logical (unsplit, llm.c) tensor is grows x gcols at goffset of the logical flat layout. A split tensor is cut
    // along its output dimension (TP_COLUMN: rows of a matrix, the columns of a bias row; TP_VOCAB: rows) or its
    // input dimension (TP_ROW: columns) into tp equal parts, each part made of `blocks` equal runs (3 for the fused
    // q, k, v, so that a rank holds whole heads of each).
    size_t grows, gcols, goffset;
    int blocks;
} ParamEntry;

typedef struct {
    GPTConfig cfg;
    int tp, tp_rank;         // tensor-parallel size and this rank's index (1, 0: the whole model)
    // pipeline parallelism (--pp): this rank holds the blocks of its chunks (layer_slot[l] >= 0: the l-th block is
    // its local layer layer_slot[l]), the embeddings on the first stage (wte, wpe), the tied wte again and the final
    // LayerNorm on the last (pp 1: everything)
    int pp, pp_rank, V;      // pipeline size, this rank's stage, chunks per rank
    int* chunk_first;        // (pp V + 1) global chunk g holds blocks [chunk_first[g], chunk_first[g + 1])
    int* layer_slot;         // (L) local index of each block, -1 when another stage holds it
    int* local_layers;       // (num_local_layers) the blocks this rank holds, ascending
    int num_local_layers;
    int has_wte, has_wpe, has_lnf;
    ParamEntry* table;       // (num_tensors) in file order
    int num_tensors;
    size_t num_params;       // n, padded vocabulary rows included (as llm.c counts them); this rank's share under tp
    size_t logical_params;   // the whole model's count (num_params when tp is 1)
    size_t embed_size;       // wte + wpe floats: flat [0, embed_size)
    size_t layer_size;       // floats per layer
    size_t lnf_offset;       // flat offset of lnfw
} ParamLayout;

// Views of a flat buffer as tensors: the parameters' (floatX) and the gradients' (fp32).
typedef struct {
    floatX* wte;             // (Vp, C)
    floatX* wpe;             // (maxT, C)
    LayerParams* layers;     // (L)
    floatX* lnfw;            // (C)
    floatX* lnfb;            // (C)
} ParamViews;
typedef struct {
    float* wte;              // (Vp, C)
    float* wpe;              // (maxT, C)
    LayerGrads* layers;      // (L)
    float* lnfw;             // (C)
    float* lnfb;             // (C)
} GradViews;

#define TP_MAX 64 // the largest tensor-parallel group (a node's GPUs, with room)

// Elements of a tensor of rows x cols split by tp (the local share; TP_NONE tensors are whole on every rank).
#define TP_LOCAL(rows, cols, split, tpn) ((size_t)(rows) * (cols) / ((split) == TP_NONE ? 1 : (size_t)(tpn)))

// Whether the model's shape splits over tp ranks (whole heads, whole vocabulary rows); 0 with a message otherwise.
static int layout_tp_valid(const GPTConfig* g, int tp, char* err, size_t cap) {
    if (tp < 1) { snprintf(err, cap, "tensor-parallel size %d", tp); return 0; }
    if (g->num_heads % tp != 0) { snprintf(err, cap, "%d heads do not divide by tensor-parallel size %d", g->num_heads, tp); return 0; }
    if (g->padded_vocab_size % tp != 0) {
        snprintf(err, cap, "the padded vocabulary (%d rows) does not divide by tensor-parallel size %d", g->padded_vocab_size, tp);
        return 0;
    }
    return 1;
}

// The layout of tensor-parallel rank tp_rank of tp on pipeline stage pp_rank of pp with V chunks per rank, the
// model cut into chunks at chunk_first (pp V + 1 entries; NULL when pp is 1). The local flat layout keeps the
// logical one's order with every split tensor shrunk to its share and the tensors of other stages left out.
static void layout_build_3d(ParamLayout* pl, const GPTConfig* g, int tp, int tp_rank, int pp, int pp_rank, int V, const int* chunk_first) {
    char err[200];
    if (!layout_tp_valid(g, tp, err, sizeof(err))) { fatal("--tp %d: %s", tp, err); }
    if (tp > TP_MAX) { fatal("--tp %d: at most %d", tp, TP_MAX); }
    int L = g->num_layers, G = pp * V;
    size_t C = (size_t)g->channels;
    memset(pl, 0, sizeof(*pl));
    pl->cfg = *g;
    pl->tp = tp;
    pl->tp_rank = tp_rank;
    pl->pp = pp;
    pl->pp_rank = pp_rank;
    pl->V = V;
    pl->chunk_first = (int*)mallocCheck(sizeof(int) * (size_t)(G + 1));
    for (int k = 0; k <= G; k++) { pl->chunk_first[k] = chunk_first ? chunk_first[k] : (k == 0 ? 0 : L); }
    pl->layer_slot = (int*)mallocCheck(sizeof(int) * (size_t)L);
    pl->local_layers = (int*)mallocCheck(sizeof(int) * (size_t)L);
    for (int l = 0; l < L; l++) { pl->layer_slot[l] = -1; }
    for (int l = 0; l < L; l++) {
        for (int k = 0; k < G; k++) {
            if (k % pp == pp_rank && l >= pl->chunk_first[k] && l < pl->chunk_first[k + 1]) {
                pl->layer_slot[l] = pl->num_local_layers;
                pl->local_layers[pl->num_local_layers++] = l;
            }
        }
    }
    pl->has_wte = pp_rank == 0 || pp_rank == pp - 1; // tied: the embedding's and the LM head's
    pl->has_wpe = pp_rank == 0;
    pl->has_lnf = pp_rank == pp - 1;
    // in-memory offsets, local and logical
    size_t layer_off[NUM_LAYER_PARAMS], layer_goff[NUM_LAYER_PARAMS];
    size_t layer_rows[NUM_LAYER_PARAMS], layer_cols[NUM_LAYER_PARAMS];
    int layer_decay[NUM_LAYER_PARAMS], layer_tp[NUM_LAYER_PARAMS], layer_init[NUM_LAYER_PARAMS];
    const char* layer_name[NUM_LAYER_PARAMS];
    size_t off = 0, goff = 0;
    int k = 0;
#define X_LAYOUT(name, rows, cols, decay, tps, init) \
    layer_off[k] = off; layer_goff[k] = goff; layer_rows[k] = (rows); layer_cols[k] = (cols); layer_decay[k] = decay; \
    layer_tp[k] = tps; layer_init[k] = init; layer_name[k] = #name; \
    off += TP_LOCAL(rows, cols, tps, tp); goff += (size_t)(rows) * (cols); k++;
    GPT_LAYER_PARAMS(X_LAYOUT)
#undef X_LAYOUT
    size_t glayer = goff;
    size_t Vp = (size_t)g->padded_vocab_size, maxT = (size_t)g->max_seq_len;
    size_t wte_local = pl->has_wte ? Vp / tp * C : 0;
    pl->layer_size = off;
    pl->embed_size = wte_local + (pl->has_wpe ? maxT * C : 0);
    pl->lnf_offset = pl->embed_size + pl->layer_size * pl->num_local_layers;
    pl->num_params = pl->lnf_offset + (pl->has_lnf ? 2 * C : 0);
    size_t gembed = Vp * C + maxT * C, glnf = gembed + glayer * L;
    pl->logical_params = glnf + 2 * C;
    // table in llm.c's file order, the tensors this rank holds
    pl->table = (ParamEntry*)callocCheck(4 + NUM_LAYER_PARAMS * (size_t)L, sizeof(ParamEntry));
    int t = 0;
    ParamEntry* e;
    if (pl->has_wte) {
        e = &pl->table[t++]; snprintf(e->name, sizeof(e->name), "wte"); e->layer = -1; e->kind = -1;
        e->grows = Vp; e->gcols = C; e->goffset = 0; e->offset = 0; e->decay = 1; e->tp_split = TP_VOCAB; e->init = INIT_NORMAL;
    }
    if (pl->has_wpe) {
        e = &pl->table[t++]; snprintf(e->name, sizeof(e->name), "wpe"); e->layer = -1; e->kind = -1;
        e->grows = maxT; e->gcols = C; e->goffset = Vp * C; e->offset = wte_local; e->decay = 1; e->tp_split = TP_NONE; e->init = INIT_NORMAL;
    }
    for (int kk = 0; kk < NUM_LAYER_PARAMS; kk++) {
        for (int l = 0; l < L; l++) {
            if (pl->layer_slot[l] < 0) { continue; }
            e = &pl->table[t++];
            snprintf(e->name, sizeof(e->name), "%s.%d", layer_name[kk], l);
            e->layer = l; e->kind = kk; e->grows = layer_rows[kk]; e->gcols = layer_cols[kk];
            e->offset = pl->embed_size + pl->layer_size * pl->layer_slot[l] + layer_off[kk];
            e->goffset = gembed + glayer * l + layer_goff[kk];
            e->decay = layer_decay[kk]; e->tp_split = layer_tp[kk]; e->init = layer_init[kk];
        }
    }
    if (pl->has_lnf) {
        e = &pl->table[t++]; snprintf(e->name, sizeof(e->name), "lnfw"); e->layer = -1; e->kind = -1;
        e->grows = 1; e->gcols = C; e->offset = pl->lnf_offset; e->goffset = glnf; e->decay = 0; e->tp_split = TP_NONE; e->init = INIT_ONES;
        e = &pl->table[t++]; snprintf(e->name, sizeof(e->name), "lnfb"); e->layer = -1; e->kind = -1;
        e->grows = 1; e->gcols = C; e->offset = pl->lnf_offset + C; e->goffset = glnf + C; e->decay = 0; e->tp_split = TP_NONE; e->init = INIT_ZEROS;
    }
    pl->num_tensors = t;
    // local shapes: the output dimension of column-parallel and vocabulary tensors, the input one of row-parallel
    for (int i = 0; i < pl->num_tensors; i++) {
        e = &pl->table[i];
        e->rows = e->grows; e->cols = e->gcols;
        e->blocks = strncmp(e->name, "qkv", 3) == 0 ? 3 : 1;
        if (e->tp_split == TP_VOCAB || (e->tp_split == TP_COLUMN && e->grows > 1)) { e->rows = e->grows / tp; }
        else if (e->tp_split == TP_COLUMN || e->tp_split == TP_ROW) { e->cols = e->gcols / tp; }
    }
}

// The layout of tensor-parallel rank tp_rank of tp (1, 0: the whole model), without pipeline stages.
static void layout_build_tp(ParamLayout* pl, const GPTConfig* g, int tp, int tp_rank) {
    layout_build_3d(pl, g, tp, tp_rank, 1, 0, 1, NULL);
}

// The pipeline stage that holds a tensor (the first one for the tied wte, which the last stage holds too).
static int layout_holder_stage(const ParamLayout* pl, const ParamEntry* e) {
    if (e->layer < 0) { return strncmp(e->name, "lnf", 3) == 0 ? pl->pp - 1 : 0; }
    for (int k = 0; k < pl->pp * pl->V; k++) {
        if (e->layer >= pl->chunk_first[k] && e->layer < pl->chunk_first[k + 1]) { return k % pl->pp; }
    }
    return 0;
}

static void layout_build(ParamLayout* pl, const GPTConfig* g) { layout_build_tp(pl, g, 1, 0); }

// Where a logical tensor's elements live under tensor parallelism. A split tensor is cut along its split dimension
// (rows for TP_VOCAB and TP_COLUMN matrices, columns for TP_ROW and TP_COLUMN biases) into `blocks` equal blocks, each
// cut into tp equal pieces; rank t holds piece t of every block, in block order. The map from a logical index to
// (owner, local index) is monotone for each owner, so the elements of any logical interval that one rank holds are
// a contiguous local interval, in the same order: moving a logical range to or from a rank is one contiguous copy
// on the rank's side and a walk over runs on the logical side.
typedef struct {
    int owner;      // tensor-parallel rank holding the run; -1 when every rank holds it (replicated, or tp 1)
    size_t local;   // index of its first element in the owner's share of the tensor
    size_t len;     // elements, consecutive in both the logical tensor and the share
} TpRun;

// The run that starts at logical index k of tensor e (0 <= k < grows*gcols), at most max elements long.
static TpRun tp_run(const ParamEntry* e, int tp, size_t k, size_t max) {
    TpRun run;
    size_t n = e->grows * e->gcols;
    if (e->tp_split == TP_NONE || tp == 1) {
        run.owner = -1; run.local = k; run.len = n - k < max ? n - k : max;
        return run;
    }
    int by_rows = e->tp_split == TP_VOCAB || (e->tp_split == TP_COLUMN && e->grows > 1);
    size_t outer = by_rows ? n : e->gcols;          // elements per repetition of the split (the tensor, or a row)
    size_t unit = by_rows ? e->gcols : 1;           // elements per index of the split dimension
    size_t dim = outer / unit, block = dim / e->blocks, piece = block / tp;
    size_t o = k / outer, r = k % outer, idx = r / unit, within = r % unit;
    size_t b = idx / block, w = idx % block;
    run.owner = (int)(w / piece);
    run.local = o * (outer / tp) + (b * piece + w % piece) * unit + within;
    run.len = (piece - w % piece) * unit - within;
    if (run.len > max) { run.len = max; }
    return run;
}

// Whether a run belongs to rank t when gathering (a replicated run is taken from rank 0) or when scattering (every
// rank keeps a replicated run).
static int tp_run_mine(const TpRun* run, int t, int gathering) { return run->owner == t || (run->owner < 0 && (!gathering || t == 0)); }

// The contiguous local interval [*lo, *lo + count) of tensor e's share that rank t holds of the logical elements
// [k0, k1) (gathering: replicated elements count for rank 0 only); returns count.
static size_t tp_local_span(const ParamEntry* e, int tp, int t, size_t k0, size_t k1, int gathering, size_t* lo) {
    size_t count = 0;
    *lo = 0;
    for (size_t k = k0; k < k1;) {
        TpRun run = tp_run(e, tp, k, k1 - k);
        if (tp_run_mine(&run, t, gathering)) {
            if (count == 0) { *lo = run.local; }
            count += run.len;
        }
        k += run.len;
    }
    return count;
}

// Moves a piece of a logical tensor to or from one rank's packed part: walks the runs of tensor e's logical elements
// [ka, kb) that tensor-parallel rank t holds (gathering: a replicated run only for rank 0) and whose local flat
// index (e->offset + run.local ...) lies in [lo, hi); to_pack copies them from `logical` (element ka of the tensor
// at logical[0]) into pack, in order, else back. Returns how many; the packed elements are a contiguous local range
// (tp_run's monotone map), starting at *first. pack NULL: only counts.
static size_t pack_runs(const ParamEntry* e, int tp, int t, int gathering, size_t ka, size_t kb, size_t lo, size_t hi,
                        float* logical, float* pack, int to_pack, size_t* first) {
    size_t count = 0;
    *first = 0;
    for (size_t k = ka; k < kb;) {
        TpRun run = tp_run(e, tp, k, kb - k);
        if (tp_run_mine(&run, t, gathering)) {
            size_t a = e->offset + run.local, b = a + run.len; // its local flat range
            size_t s = a > lo ? a : lo, x = b < hi ? b : hi;
            if (s < x) {
                if (count == 0) { *first = s; }
                float* g = logical + (k - ka) + (s - a);
                if (pack && to_pack) { memcpy(pack + count, g, (x - s) * sizeof(float)); }
                else if (pack) { memcpy(g, pack + count, (x - s) * sizeof(float)); }
                count += x - s;
            }
        }
        k += run.len;
    }
    return count;
}

// Copies between a logical (whole-model) flat buffer and a rank's local one, tensor by tensor: to_local takes this
// rank's share of every tensor (slicing on load), else it puts the local share back into its place in the logical
// buffer (one rank's part of gathering on save).
static void layout_copy_tp(const ParamLayout* pl, float* logical, float* local, int to_local) {
    for (int i = 0; i < pl->num_tensors; i++) {
        const ParamEntry* e = &pl->table[i];
        size_t first; // (a whole tensor's share starts at the tensor's offset)
        pack_runs(e, pl->tp, pl->tp_rank, 0, 0, e->grows * e->gcols, 0, SIZE_MAX, logical + e->goffset, local + e->offset, to_local, &first);
    }
}

static void layout_free(ParamLayout* pl) {
    free(pl->table);
    free(pl->chunk_first);
    free(pl->layer_slot);
    free(pl->local_layers);
}

// Points layer l's views at `p`, a layer-sized region (the table's shapes use C, hence the local). A macro, so one
// body serves the parameters' views (floatX) and the gradients' (fp32).
#define VIEWS_BIND_LAYER(v, pl, l, p) do { \
        size_t C = (size_t)(pl)->cfg.channels; \
        int tp__ = (pl)->tp; \
        __typeof__(v) v__ = (v); \
        int l__ = (l); \
        __typeof__(p) p__ = (p); \
        GPT_LAYER_PARAMS(X_BIND) \
    } while (0)
#define X_BIND(name, rows, cols, decay, tps, init) v__->layers[l__].name = p__; p__ += TP_LOCAL(rows, cols, tps, tp__);

// Points the views at a flat buffer laid out as the table says (NULL for what other pipeline stages hold).
#define VIEWS_BIND(v, pl, base, LayerType) do { \
        int L_ = (pl)->cfg.num_layers; \
        size_t C_ = (size_t)(pl)->cfg.channels; \
        if (!(v)->layers) { (v)->layers = (LayerType*)callocCheck(L_, sizeof(LayerType)); } \
        (v)->wte = (pl)->has_wte ? (base) : NULL; \
        (v)->wpe = (pl)->has_wpe ? (base) + ((pl)->has_wte ? (size_t)(pl)->cfg.padded_vocab_size / (pl)->tp * C_ : 0) : NULL; \
        for (int i_ = 0; i_ < (pl)->num_local_layers; i_++) { \
            VIEWS_BIND_LAYER(v, pl, (pl)->local_layers[i_], (base) + (pl)->embed_size + (pl)->layer_size * i_); \
        } \
        (v)->lnfw = (pl)->has_lnf ? (base) + (pl)->lnf_offset : NULL; \
        (v)->lnfb = (pl)->has_lnf ? (v)->lnfw + C_ : NULL; \
    } while (0)

// The working arena of ZeRO stages 2 and 3: [wte+wpe | lnfw+lnfb | layer slot 0 | layer slot 1], the parts this
// pipeline stage holds. Stage 2 keeps its gradients in one (the layers take the two slots in turn); stage 3 also
// gathers its parameters into one. Sized in elements.
static size_t arena_size(const ParamLayout* pl) {
    return pl->embed_size + (pl->has_lnf ? 2 * (size_t)pl->cfg.channels : 0) + 2 * pl->layer_size;
}
static size_t arena_slot_offset(const ParamLayout* pl, int slot) {
    return pl->embed_size + (pl->has_lnf ? 2 * (size_t)pl->cfg.channels : 0) + (size_t)slot * pl->layer_size;
}

// Points the embeddings' and the final LayerNorm's views at their places in an arena (the layers are bound a slot at
// a time by VIEWS_BIND_LAYER).
#define ARENA_BIND(v, pl, base, LayerType) do { \
        size_t C_ = (size_t)(pl)->cfg.channels; \
        if (!(v)->layers) { (v)->layers = (LayerType*)callocCheck((pl)->cfg.num_layers, sizeof(LayerType)); } \
        (v)->wte = (pl)->has_wte ? (base) : NULL; \
        (v)->wpe = (pl)->has_wpe ? (base) + ((pl)->has_wte ? (size_t)(pl)->cfg.padded_vocab_size / (pl)->tp * C_ : 0) : NULL; \
        (v)->lnfw = (pl)->has_lnf ? (base) + (pl)->embed_size : NULL; \
        (v)->lnfb = (pl)->has_lnf ? (v)->lnfw + C_ : NULL; \
    } while (0)

static void views_bind(ParamViews* v, const ParamLayout* pl, floatX* base) { VIEWS_BIND(v, pl, base, LayerParams); }
static void grad_views_bind(GradViews* v, const ParamLayout* pl, float* base) { VIEWS_BIND(v, pl, base, LayerGrads); }
static void grad_views_bind_layer(GradViews* v, const ParamLayout* pl, int l, float* p) { VIEWS_BIND_LAYER(v, pl, l, p); }
static void views_bind_layer(ParamViews* v, const ParamLayout* pl, int l, floatX* p) { VIEWS_BIND_LAYER(v, pl, l, p); }

// Parameters of a model of this shape (padded vocabulary rows included), from the table, without allocating: the
// size a model file must have is known before any big allocation.
static size_t gpt_num_params(const GPTConfig* g) {
    size_t C = (size_t)g->channels, per_layer = 0;
#define X_SUM(name, rows, cols, decay, tp, init) per_layer += (size_t)(rows) * (cols);
    GPT_LAYER_PARAMS(X_SUM)
#undef X_SUM
    return (size_t)g->padded_vocab_size * C + (size_t)g->max_seq_len * C + per_layer * g->num_layers + 2 * C;
}

// The digits of an llm.c model descriptor (d<N>, gpt2:d<N>, gpt3:c<N>; *gpt3: the last form), or NULL when name has
// not that form.
static const char* llmc_descriptor_digits(const char* name, int* gpt3) {
    *gpt3 = strncmp(name, "gpt3:c", 6) == 0;
    const char* digits = name[0] == 'd' ? name + 1 : strncmp(name, "gpt2:d", 6) == 0 || *gpt3 ? name + 6 : NULL;
    if (!digits || !*digits) { return NULL; }
    for (const char* q = digits; *q; q++) { if (!isdigit((unsigned char)*q)) { return NULL; } }
    return digits;
}

// llm.c's model descriptors (train_gpt2.cu's gpt_build_from_descriptor): GPT-2 shapes by depth, d<N> or
// gpt2:d<N> (context 1024), and GPT-3 shapes by width, gpt3:c<N> (context 2048). Returns 0 for a size llm.c has not.
static int llmc_shape(const char* name, int* L, int* C, int* NH, int* T) {
    static const int gpt2[][3] = {{6, 384, 6}, {12, 768, 12}, {24, 1024, 16}, {36, 1280, 20}, {48, 1600, 25},
                                  {60, 1920, 30}, {72, 2880, 30}, {84, 3456, 36}}; // depth, channels, heads
    static const int gpt3[][3] = {{384, 6, 64}, {768, 12, 64}, {1024, 24, 64}, {1536, 24, 96}, {2048, 24, 128},
                                  {2560, 32, 80}, {4096, 32, 128}, {5120, 40, 128}, {12288, 96, 128}}; // channels, depth, head size
    int is3;
    const char* digits = llmc_descriptor_digits(name, &is3);
    if (!digits) { return 0; }
    long n = strtol(digits, NULL, 10); // (too many digits: LONG_MAX, no size of llm.c's)
    for (int i = 0; !is3 && i < (int)(sizeof(gpt2) / sizeof(gpt2[0])); i++) {
        if (gpt2[i][0] == n) { *L = gpt2[i][0]; *C = gpt2[i][1]; *NH = gpt2[i][2]; *T = 1024; return 1; }
    }
    for (int i = 0; is3 && i < (int)(sizeof(gpt3) / sizeof(gpt3[0])); i++) {
        if (gpt3[i][0] == n) { *L = gpt3[i][1]; *C = gpt3[i][0]; *NH = gpt3[i][0] / gpt3[i][2]; *T = 2048; return 1; }
    }
    return 0;
}

// Model sizes by name. Returns 0 if the name is unknown.
static int config_from_name(GPTConfig* g, const char* name) {
    int L = 0, C = 0, NH = 0, T = 1024;
    if (llmc_shape(name, &L, &C, &NH, &T)) {
        // llm.c's descriptors (d12 is GPT-2 124M, d48 GPT-2 1558M, gpt3:c768 GPT-3 125M, ...)
    } else if (name[0] == 'd' && isdigit((unsigned char)name[1])) {
        // other depths: N layers of 64N channels in N heads of 64
        char* end;
        long d = strtol(name + 1, &end, 10);
        if (*end != '\0' || d < 1 || d > 256) { return 0; }
        L = (int)d; C = 64 * (int)d; NH = (int)d;
    } else if (strcmp(name, "gpt2-124M") == 0 || strcmp(name, "gpt2") == 0) { L = 12; C = 768; NH = 12; } // HF names too
    else if (strcmp(name, "gpt2-350M") == 0 || strcmp(name, "gpt2-medium") == 0) { L = 24; C = 1024; NH = 16; }
    else if (strcmp(name, "gpt2-774M") == 0 || strcmp(name, "gpt2-large") == 0) { L = 36; C = 1280; NH = 20; }
    else if (strcmp(name, "gpt2-1558M") == 0 || strcmp(name, "gpt2-xl") == 0) { L = 48; C = 1600; NH = 25; }
    else if (strcmp(name, "gpt3-125M") == 0) { L = 12; C = 768; NH = 12; T = 2048; }
    else if (strcmp(name, "gpt3-350M") == 0) { L = 24; C = 1024; NH = 16; T = 2048; }
    else if (strcmp(name, "gpt3-760M") == 0) { L = 24; C = 1536; NH = 16; T = 2048; }
    else if (strcmp(name, "gpt3-1.3B") == 0) { L = 24; C = 2048; NH = 16; T = 2048; }
    else if (strcmp(name, "gpt3-2.7B") == 0) { L = 32; C = 2560; NH = 32; T = 2048; }
    else { return 0; }
    g->max_seq_len = T;
    g->vocab_size = 50257;
    g->padded_vocab_size = (50257 + 127) / 128 * 128; // 50304
    g->num_layers = L;
    g->num_heads = NH;
    g->channels = C;
    return 1;
}

#endif // LAYOUT_H
