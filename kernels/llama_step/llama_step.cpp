// A fused llama / qwen2 forward for a few tokens (decode, verify, prefill).
//
// Why: the per-op PyTorch forward (voicepipe/nn/llama.py, the reference this
// kernel is tested against) spent ~24 ms per SmolLM2-135M token in dispatch
// and Python overhead: 30 layers × ~20 small ops, against ~6 ms of weight
// reads. Here the whole step is one call: plain loops for the small ops and
// one matrix kernel per projection. The matrices multiply int8-quantized
// activations (per 32 values) with int8 weights (q8a8.h) or the GGUF's Q4_1
// grid (q4a8.h), on AVX512-VNNI or AVX2 (simd.h); an int8 matrix whose K is not
// a multiple of 64 takes fp32 activations (q8gemm.h). Each weight row is read
// once for up to 8 tokens.
//
// Batch invariance: every token row goes through the same arithmetic whatever
// the number of tokens fed (row-independent matrix kernels, attention one row
// at a time), so verifying K+1 positions gives bit-identical logits to K+1
// single decode steps, and greedy speculative decoding stays token-identical.
//
// Layouts (checked): activations fp32; matrices as make_qw (matrix.h) documents; Q/K rows
// in interleaved-RoPE order (pairs 2i, 2i+1); the KV cache one fp32 tensor
// (n_layer, 2, n_kv_head, max_len, head_dim), shared with the reference path.
#include <immintrin.h>
#include "../torch_binding.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "matrix.h"
#include "ops.h"
#include "profile.h"
#include "simd.h"

namespace {

using namespace step;
using simd::exp16;
using simd::F16;
using simd::hsum16;

// The shape of the rows fed in one call: a chain (row t at depth t: decode,
// verify, prefill) or a tree of drafts (forward_into's parents).
class Tree {
 public:
  static Tree chain() { return Tree(); }

  Tree(const std::vector<int64_t>& parents, int64_t T) : chain_(false), T_(T) {
    TORCH_CHECK((int64_t)parents.size() == T && T > 0 && parents[0] == -1,
                "parents: one entry per row, -1 for row 0 (it follows the cache)");
    depth_.assign(T, 0);
    path_.assign(T * T, 0);
    straight_.assign(T, 1);
    for (int64_t t = 1; t < T; ++t) {
      const int64_t p = parents[t];
      TORCH_CHECK(p >= 0 && p < t, "parents[", t, "] must be an earlier row");
      depth_[t] = depth_[p] + 1;
      std::memcpy(&path_[t * T], &path_[p * T], depth_[p] * sizeof(int64_t) + sizeof(int64_t));
      path_[t * T + depth_[t]] = t;
      straight_[t] = straight_[p] && depth_[t] == t;
    }
  }

  int64_t depth(int64_t t) const { return chain_ ? t : depth_[t]; }
  // Row t's path is slots pos..pos+t (every row of a chain; a tree's main branch).
  bool straight(int64_t t) const { return chain_ || straight_[t]; }
  // The cache slot of row t's key j (j ≤ pos + depth(t)).
  int64_t slot(int64_t t, int64_t j, int64_t pos) const {
    return chain_ || j <= pos ? j : pos + path_[t * T_ + (j - pos)];
  }

 private:
  Tree() = default;
  bool chain_ = true;
  int64_t T_ = 0;
  std::vector<int64_t> depth_, path_;  // path_[t·T + i]: the row at depth i on row t's path
  std::vector<char> straight_;
};

// Keys per attention block (attend_tile); a shared prefix is cut to whole blocks.
constexpr int64_t kKeyBlock = 16;

// One layer's view of a segment's shared prefix (Segment::shared_kv): keys and
// values of positions [0, len) read from another cache, (Hkv, Lmax, D) each.
struct Shared {
  const float* k = nullptr;
  const float* v = nullptr;
  int64_t len = 0, Lmax = 0;
};

struct Layer {
  torch::Tensor attn_norm, ffn_norm, bqkv;
  QW qkv, o, w13, w2;
};

// One caller's rows in a pass: T rows fed at positions [pos, pos + T) of their
// own KV cache. A pass runs several segments (several sessions' steps) through
// each weight matrix together, so the weights are read once for all of them,
// while rotation and attention stay per segment (each its own cache and
// positions). The matrices are row-independent, so every row's result is the
// same whatever else shares its pass.
struct Segment {
  int64_t T = 0, pos = 0, Lmax = 0;
  float* kv = nullptr;              // (n_layer, 2, Hkv, Lmax, D)
  const Tree* tree = nullptr;       // nullptr: a chain
  float* normed = nullptr;          // receives the T rows' final-normed states, or nullptr
  bool last_only = false;           // the head reads only the last row
  // Another segment's cache whose first shared_len positions hold the same keys and
  // values as this one's (the same tokens there: a system prompt every session
  // copied from the prefix cache). Attention reads those positions from it, so a
  // pass of many sessions streams the shared prefix from memory once and then
  // from cache, instead of once per session. The values are the same bits, so
  // every row's result is too. shared_len is a multiple of the key block (16).
  const float* shared_kv = nullptr;  // (n_layer, 2, Hkv, shared_Lmax, D), or nullptr
  int64_t shared_len = 0, shared_Lmax = 0;
};

class Model {
 public:
  // layers[i] = [attn_norm, ffn_norm, bqkv (empty if none)]; mats[i] = [qkv, o, w13, w2],
  // each a matrix as make_qw takes it; head likewise.
  Model(int64_t n_head, int64_t n_kv_head, int64_t head_dim, double eps, torch::Tensor embed,
        torch::Tensor norm, torch::Tensor cos, torch::Tensor sin,
        std::vector<std::vector<torch::Tensor>> layers,
        std::vector<std::vector<std::vector<torch::Tensor>>> mats, std::vector<torch::Tensor> head)
      : H_(n_head), Hkv_(n_kv_head), D_(head_dim), eps_((float)eps), embed_(embed), norm_(norm),
        cos_(cos), sin_(sin) {
    TORCH_CHECK(D_ % 64 == 0, "head_dim must be a multiple of 64");
    TORCH_CHECK(H_ % Hkv_ == 0, "n_head must be a multiple of n_kv_head");
    TORCH_CHECK(embed.scalar_type() == torch::kFloat && embed.is_contiguous() && embed.dim() == 2,
                "embed must be contiguous (V, dim) float32");
    dim_ = embed.size(1);
    TORCH_CHECK(cos.sizes() == sin.sizes() && cos.size(1) == D_ / 2 && cos.is_contiguous() &&
                    sin.is_contiguous() && cos.scalar_type() == torch::kFloat,
                "cos/sin must be contiguous (max_len, head_dim/2) float32");
    TORCH_CHECK(layers.size() == mats.size(), "one norms entry and one matrices entry per layer");
    for (size_t i = 0; i < layers.size(); ++i) {
      TORCH_CHECK(layers[i].size() == 3 && mats[i].size() == 4, "layer ", i, ": bad entry sizes");
      Layer ly;
      ly.attn_norm = layers[i][0].contiguous();
      ly.ffn_norm = layers[i][1].contiguous();
      ly.bqkv = layers[i][2];
      ly.qkv = make_qw(mats[i][0]);
      ly.o = make_qw(mats[i][1]);
      ly.w13 = make_qw(mats[i][2]);
      ly.w2 = make_qw(mats[i][3]);
      TORCH_CHECK(ly.qkv.n == (H_ + 2 * Hkv_) * D_ && ly.qkv.k == dim_, "wqkv shape");
      TORCH_CHECK(ly.o.n == dim_ && ly.o.k == H_ * D_, "wo shape");
      TORCH_CHECK(ly.w13.k == dim_ && ly.w2.n == dim_ && ly.w13.n == 2 * ly.w2.k, "ffn shapes");
      TORCH_CHECK(ly.bqkv.numel() == 0 || ly.bqkv.numel() == ly.qkv.n, "bqkv shape");
      layers_.push_back(ly);
    }
    ffn_ = layers_.empty() ? 0 : layers_[0].w2.k;
    head_ = make_qw(head);
    TORCH_CHECK(head_.k == dim_, "head shape");
  }

  // Feed tokens (T,) at positions [pos, pos+T); write their keys/values into kv.
  // Returns fp32 logits (T, V), or (1, V) with last_only; best (optional, int64,
  // one entry per logits row) receives each row's argmax, found while the head
  // computes it (what greedy decoding needs, without reading the logits back).
  // threads: of this call (0: the model's threads_), so that concurrent callers each
  // choose theirs instead of sharing one setting.
  torch::Tensor forward(torch::Tensor tokens, torch::Tensor kv, int64_t pos, bool last_only,
                        std::optional<torch::Tensor> best, int64_t threads) {
    std::vector<float> x = embed_rows(tokens);
    const int64_t T = tokens.size(0);
    return run(x, T, kv, pos, last_only, nullptr, nullptr, best_ptr(best, last_only ? 1 : T),
               (int)threads);
  }

  // Several callers' rows in one pass (Segment): tokens (ΣT,) in segment order,
  // segment i's counts[i] rows fed at pos[i] into kvs[i]; feats[i] (or an empty
  // tensor) receives their final-normed states at rows [pos[i], pos[i] + T) as
  // forward_into does, parents[i] (or []) makes them a tree. Returns the logits
  // of every segment's rows in order, or of its last row only where last_only[i];
  // best as in forward, one entry per logits row. shared_ref[i] (optional, one
  // entry per segment, -1: none) names a segment whose cache holds the same keys
  // and values as segment i's over their first shared_len[i] positions (the
  // caller's promise: the same tokens at those positions); attention reads that
  // part from there (Segment::shared_kv), rounded down to a 16-key block.
  torch::Tensor forward_batch(torch::Tensor tokens, std::vector<torch::Tensor> kvs,
                              std::vector<int64_t> pos, std::vector<int64_t> counts,
                              std::vector<bool> last_only, std::vector<torch::Tensor> feats,
                              std::vector<std::vector<int64_t>> parents,
                              std::optional<torch::Tensor> best, int64_t threads,
                              std::vector<int64_t> shared_ref, std::vector<int64_t> shared_len) {
    const size_t n = kvs.size();
    TORCH_CHECK(n > 0 && pos.size() == n && counts.size() == n && last_only.size() == n &&
                    feats.size() == n && parents.size() == n,
                "one kv, pos, count, last_only, feats and parents entry per segment");
    std::vector<float> x = embed_rows(tokens);
    std::vector<Tree> trees;
    trees.reserve(n);  // no reallocation: segments point into it
    std::vector<Segment> segs(n);
    int64_t total = 0, rows = 0;
    for (size_t i = 0; i < n; ++i) {
      Segment& s = segs[i];
      s.T = counts[i];
      s.pos = pos[i];
      TORCH_CHECK(s.T > 0, "segment ", i, " has no rows");
      s.kv = check_kv(kvs[i], s.pos, s.T, s.Lmax);
      s.last_only = last_only[i];
      if (feats[i].numel()) {
        const torch::Tensor& f = feats[i];
        TORCH_CHECK(f.scalar_type() == torch::kFloat && f.is_contiguous() && f.dim() == 2 &&
                        f.size(1) == dim_ && s.pos + s.T <= f.size(0),
                    "feats[", i, "]: a contiguous (max_len, dim) float32 tensor covering the rows");
        s.normed = f.data_ptr<float>() + s.pos * dim_;
      }
      if (!parents[i].empty()) {
        trees.emplace_back(parents[i], s.T);
        s.tree = &trees.back();
      }
      total += s.T;
      rows += s.last_only ? 1 : s.T;
    }
    TORCH_CHECK(total == tokens.size(0), "counts must add up to the tokens given");
    TORCH_CHECK(shared_ref.size() == shared_len.size() &&
                    (shared_ref.empty() || shared_ref.size() == n),
                "shared_ref and shared_len: none, or one entry each per segment");
    for (size_t i = 0; i < shared_ref.size(); ++i) {
      const int64_t r = shared_ref[i];
      if (r < 0 || (size_t)r == i) continue;
      TORCH_CHECK((size_t)r < n, "shared_ref[", i, "] names no segment");
      // Only positions both caches held before this pass (neither writes them now).
      const int64_t len = std::min({shared_len[i], segs[i].pos, segs[r].pos}) / kKeyBlock * kKeyBlock;
      if (len <= 0) continue;
      segs[i].shared_kv = segs[r].kv;
      segs[i].shared_len = len;
      segs[i].shared_Lmax = segs[r].Lmax;
    }
    return run_segments(x, segs, best_ptr(best, rows), (int)threads);
  }

  // forward() that also writes every fed row's final-normed hidden state (what
  // the head reads) into rows [pos, pos+T) of feats (max_len, dim): the
  // features an EAGLE draft reads, without a tensor, a norm and a copy in Python.
  //
  // parents (optional, T entries): the rows form a tree instead of a chain.
  // Row 0 (parents[0] = -1) follows the cache; row t > 0 follows row
  // parents[t] < t. Each row sits in slot pos + t of the cache but at position
  // pos + its depth, and attends to the cache and its own ancestors only, in
  // path order: exactly the keys a decode of its path would see, in the same
  // order, so its logits are bit-identical to that decode's (Tree).
  torch::Tensor forward_into(torch::Tensor tokens, torch::Tensor kv, int64_t pos, bool last_only,
                             torch::Tensor feats, std::vector<int64_t> parents,
                             std::optional<torch::Tensor> best, int64_t threads) {
    TORCH_CHECK(feats.scalar_type() == torch::kFloat && feats.is_contiguous() && feats.dim() == 2 &&
                    feats.size(1) == dim_ && pos >= 0 && pos + tokens.numel() <= feats.size(0),
                "feats must be a contiguous (max_len, dim) float32 tensor covering the rows fed");
    std::vector<float> x = embed_rows(tokens);
    const int64_t T = tokens.size(0);
    int64_t* bp = best_ptr(best, last_only ? 1 : T);
    float* out = feats.data_ptr<float>() + pos * dim_;
    if (parents.empty()) return run(x, T, kv, pos, last_only, out, nullptr, bp, (int)threads);
    const Tree tree(parents, T);
    return run(x, T, kv, pos, last_only, out, &tree, bp, (int)threads);
  }

  // Profiling (profile.h): on = true clears the table and starts summing every
  // later pass into it; on = false stops.
  void profile(bool on) {
    prof_.reset();
    prof_.on = on;
  }

  // The table so far: passes, rows (summed over passes), wall_ms (member 0's
  // wall time in the passes), per member {phase: ms} (summed over passes), and
  // the bytes of weights one pass reads per matrix (summed over layers).
  pybind11::dict profile_table() const {
    pybind11::dict d, bytes;
    d["passes"] = prof_.passes;
    d["rows"] = prof_.rows;
    d["wall_ms"] = prof_.wall_ns * 1e-6;
    pybind11::list members;
    for (int64_t i = 0; i < prof_.members; ++i) {
      pybind11::dict m;
      for (int p = 0; p < prof::kPhases; ++p) m[prof::kNames[p]] = prof_.row[i].ns[p] * 1e-6;
      members.append(m);
    }
    d["members"] = members;
    int64_t qkv = 0, o = 0, w13 = 0, w2 = 0;
    for (const Layer& ly : layers_) {
      qkv += weight_bytes(ly.qkv);
      o += weight_bytes(ly.o);
      w13 += weight_bytes(ly.w13);
      w2 += weight_bytes(ly.w2);
    }
    bytes["qkv"] = qkv;
    bytes["o"] = o;
    bytes["w13"] = w13;
    bytes["w2"] = w2;
    bytes["head"] = weight_bytes(head_);
    d["weight_bytes"] = bytes;
    d["q4"] = head_.q4;
    return d;
  }

  // The input projection of an EAGLE draft run on this (one-layer) model: x = fc([f ; e]) + b.
  void set_input_proj(std::vector<torch::Tensor> fc, torch::Tensor bias) {
    fc_ = make_qw(fc);
    TORCH_CHECK(fc_.k == 2 * dim_ && fc_.n == dim_, "fc must map 2·dim to dim");
    TORCH_CHECK(bias.scalar_type() == torch::kFloat && bias.is_contiguous() && bias.numel() == dim_,
                "fc bias must be (dim,) float32");
    fc_bias_ = bias;
  }

  // One EAGLE draft step in one call: rows t read (f[t], embed[tokens[t]]) at
  // positions [pos, pos+T). Returns the last row's output feature (the normed
  // state the head reads, (dim,)), the head's kTop likeliest rows (argmax
  // first) and their softmax probabilities: the guess, then a tree's siblings.
  // Per drafted token this replaces ~10 torch ops and their tensors, which
  // cost as much as the layer itself right after a target pass.
  static constexpr int kTop = 3;  // the guess and two runner-ups (a draft tree's siblings)
  std::tuple<torch::Tensor, std::vector<int64_t>, std::vector<double>> eagle_step(
      torch::Tensor f, torch::Tensor tokens, torch::Tensor kv, int64_t pos) {
    TORCH_CHECK(fc_.n > 0, "set_input_proj first");
    TORCH_CHECK(f.scalar_type() == torch::kFloat && f.is_contiguous() && f.dim() == 2 &&
                    f.size(1) == dim_ && f.size(0) == tokens.numel(),
                "f must be a contiguous (T, dim) float32 tensor, one row per token");
    const int64_t T = f.size(0), dim = dim_;
    std::vector<float> e = embed_rows(tokens), fe(T * 2 * dim), x(T * dim), normed(T * dim);
    const float* fp = f.data_ptr<float>();
    for (int64_t t = 0; t < T; ++t) {
      std::memcpy(&fe[t * 2 * dim], fp + t * dim, dim * sizeof(float));
      std::memcpy(&fe[t * 2 * dim + dim], &e[t * dim], dim * sizeof(float));
    }
    matmul(fc_, fe.data(), x.data(), T, threads_);
    const float* b = fc_bias_.data_ptr<float>();
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < dim; ++i) x[t * dim + i] += b[i];
    const torch::Tensor logits = run(x, T, kv, pos, true, normed.data());
    const float* l = logits.data_ptr<float>();
    const int64_t n = logits.size(1);
    // The kTop likeliest rows, best first (ties: the lower row first, as argmax picks).
    int64_t top[kTop];
    int found = 0;
    for (int64_t j = 0; j < n; ++j) {
      if (found == kTop && !(l[j] > l[top[kTop - 1]])) continue;
      int p = found < kTop ? found++ : kTop - 1;
      for (; p > 0 && l[j] > l[top[p - 1]]; --p) top[p] = top[p - 1];
      top[p] = j;
    }
    // Softmax probabilities: exp(l - max) / Σ exp(l - max).
    const int64_t best = top[0];
    const F16 mx = simd::set1(l[best]);
    F16 acc = simd::zero();
    for (int64_t j = 0; j < n; j += 16) {
      const F16 e = exp16(simd::sub(simd::load_tail_or(mx, l + j, n - j), mx));
      acc = simd::add(acc, simd::keep_tail(e, n - j));
    }
    auto h = torch::empty({dim}, torch::kFloat);
    std::memcpy(h.data_ptr<float>(), &normed[(T - 1) * dim], dim * sizeof(float));
    const double inv = 1.0 / (double)simd::reduce_add(acc);
    std::vector<int64_t> rows(top, top + found);
    std::vector<double> probs;
    for (int i = 0; i < found; ++i) probs.push_back(std::exp((double)(l[top[i]] - l[best])) * inv);
    return {h, rows, probs};
  }

 private:
  // Embedding rows (T, dim) of token ids (T,).
  std::vector<float> embed_rows(const torch::Tensor& tokens) const {
    TORCH_CHECK(tokens.dim() == 1 && tokens.scalar_type() == torch::kLong && tokens.is_contiguous(),
                "tokens: contiguous (T,) int64");
    const int64_t T = tokens.size(0), V = embed_.size(0), dim = dim_;
    TORCH_CHECK(T > 0, "no tokens");
    const int64_t* tk = tokens.data_ptr<int64_t>();
    for (int64_t t = 0; t < T; ++t) TORCH_CHECK(tk[t] >= 0 && tk[t] < V, "token id out of range");
    std::vector<float> x(T * dim);
    const float* E = embed_.data_ptr<float>();
    for (int64_t t = 0; t < T; ++t) std::memcpy(&x[t * dim], E + tk[t] * dim, dim * sizeof(float));
    return x;
  }

  // best's data, checked to hold one int64 per logits row (nullptr without it).
  static int64_t* best_ptr(std::optional<torch::Tensor>& best, int64_t rows) {
    if (!best) return nullptr;
    TORCH_CHECK(best->scalar_type() == torch::kLong && best->is_contiguous() &&
                    best->numel() == rows,
                "best must be a contiguous int64 tensor with one entry per logits row");
    return best->data_ptr<int64_t>();
  }

  // The (n_layer, 2, Hkv, Lmax, D) cache's data, checked to hold rows [pos, pos + T).
  float* check_kv(torch::Tensor& kv, int64_t pos, int64_t T, int64_t& Lmax) const {
    TORCH_CHECK(kv.scalar_type() == torch::kFloat && kv.is_contiguous() && kv.dim() == 5 &&
                    kv.size(0) == (int64_t)layers_.size() && kv.size(1) == 2 &&
                    kv.size(2) == Hkv_ && kv.size(4) == D_,
                "kv must be contiguous (n_layer, 2, n_kv_head, max_len, head_dim) float32");
    Lmax = kv.size(3);
    TORCH_CHECK(pos >= 0 && pos + T <= Lmax && pos + T <= cos_.size(0),
                "positions out of range of the cache");
    return kv.data_ptr<float>();
  }

  // normed_out (T, dim), when given, receives every row's final-normed state,
  // and the head reads its rows from there (the same values as without it).
  // tree: the rows' shape (nullptr: a chain); best: the head's argmax per row.
  torch::Tensor run(std::vector<float>& x, int64_t T, torch::Tensor kv, int64_t pos,
                    bool last_only, float* normed_out = nullptr, const Tree* tree = nullptr,
                    int64_t* best = nullptr, int threads = 0) {
    Segment s;
    s.T = T;
    s.pos = pos;
    s.kv = check_kv(kv, pos, T, s.Lmax);
    s.tree = tree;
    s.normed = normed_out;
    s.last_only = last_only;
    std::vector<Segment> one{s};
    return run_segments(x, one, best, threads);
  }

  // x (ΣT, dim): the segments' rows in order. Matrices over all rows at once,
  // rotation and attention per segment, the head over each segment's rows (its
  // last only where last_only).
  //
  // The whole pass is one team job (team.h): every op is split over the
  // members (matrices by output rows, rotation by (row, KV head), attention by
  // (segment, KV head, 16-row tile), the row-wise ops by 64-value units), and
  // members meet at a barrier where an op needs the previous one's every
  // output: 9 per layer. Each op that feeds a matrix quantizes its own share
  // of that matrix's input as it writes it (the norms, attention's output,
  // the SiLU product), so quantizing costs no pass of its own. Every value is
  // computed by the same arithmetic whichever member computes it, so results
  // do not depend on the number of threads.
  torch::Tensor run_segments(std::vector<float>& x, const std::vector<Segment>& segs,
                             int64_t* best, int threads) {
    const int nt = threads > 0 ? threads : threads_;
    // A chain is the tree whose row t has depth t: one code path for both.
    const Tree chain = Tree::chain();
    int64_t T = 0, rows = 0;
    for (const Segment& s : segs) {
      T += s.T;
      rows += s.last_only ? 1 : s.T;
    }
    const int64_t dim = dim_, nqkv = (H_ + 2 * Hkv_) * D_, ffn = ffn_, HD = H_ * D_;
    std::vector<float> x2(T * dim), h(T * dim), qkv(T * nqkv), att(T * HD), gu(T * 2 * ffn),
        act(T * ffn), tmp(T * dim), head_in(rows * dim);
    ActBuf buf;
    buf.fit(T, std::max({dim, HD, ffn}));

    // Rotation items (segment, row, KV head) and attention items (segment, KV
    // head, tile of up to 16 rows), in order.
    struct RopeItem {
      const Segment* s;
      int64_t r0, t, g;
    };
    struct AttItem {
      const Segment* s;
      int64_t r0, g, t0, t1;
    };
    constexpr int64_t kRows = 16;  // rows per attention tile: a verify pass is one tile
    std::vector<RopeItem> ropes;
    std::vector<AttItem> atts;
    // The final norm's rows: source row, and where its normed values go (the
    // segment's normed buffer, the head's input row; either may be absent).
    struct OutRow {
      int64_t src;
      float* normed;
      int64_t head;  // row of head_in, or -1
    };
    std::vector<OutRow> outs;
    {
      int64_t r0 = 0, o = 0;
      for (const Segment& s : segs) {
        for (int64_t t = 0; t < s.T; ++t)
          for (int64_t g = 0; g < Hkv_; ++g) ropes.push_back({&s, r0, t, g});
        for (int64_t g = 0; g < Hkv_; ++g)
          for (int64_t t0 = 0; t0 < s.T; t0 += kRows)
            atts.push_back({&s, r0, g, t0, std::min(s.T, t0 + kRows)});
        const int64_t first = s.last_only ? s.T - 1 : 0;
        for (int64_t t = 0; t < s.T; ++t) {
          float* nd = s.normed != nullptr ? s.normed + t * dim : nullptr;
          const int64_t hr = t >= first ? o + t - first : -1;
          if (nd != nullptr || hr >= 0) outs.push_back({r0 + t, nd, hr});
        }
        r0 += s.T;
        o += s.T - first;
      }
    }
    auto logits = torch::empty({rows, head_.n}, torch::kFloat);
    float* lp = logits.data_ptr<float>();
    Argmax am;
    // Each matrix's columns, claimed by the members (Chunks): 4 a layer, then the head.
    std::unique_ptr<Chunks[]> chunks(new Chunks[4 * layers_.size() + 1]);

    const int64_t t_start = prof_.on ? prof::now_ns() : 0, laps0 = prof_.row[0].total();
    team::Pool::get().run(nt, [&](Ctx& c) {
      prof::Lap lap(prof_, c.tid);
      // The work since the last lap is phase p's, then the barrier's wait.
      auto bar = [&](prof::Phase p) {
        lap(p);
        c.barrier();
        lap(prof::kBarrier);
      };
      if (c.tid == 0 && best) am.fit(c.nt, rows);
      float* xa = x.data();  // the residual stream; xb receives xa + tmp
      float* xb = x2.data();
      bool pending = false;  // tmp holds a matrix output still to add to xa
      int64_t i0, i1;
      // h = norm(xa (+ tmp)) · w, xb = xa + tmp, and this member's share of
      // quantizing h for matrix q; then the barrier.
      auto add_norm = [&](const float* w, const QW& q) {
        const int64_t unit = unit_of(q), nu = dim / unit;
        c.split(T * nu, i0, i1);
        int64_t row = -1;
        float r = 0.0f;
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t m = i / nu, j0 = (i % nu) * unit;
          const float* xr = xa + m * dim;
          const float* ar = pending ? tmp.data() + m * dim : nullptr;
          if (m != row) {
            r = rms_factor(xr, ar, dim, eps_);
            row = m;
          }
          float* hr = h.data() + m * dim;
          if (ar != nullptr) {
            float* xo = xb + m * dim;
            for (int64_t j = j0; j < j0 + unit; ++j) {
              const float v = xr[j] + ar[j];
              xo[j] = v;
              hr[j] = v * r * w[j];
            }
          } else {
            for (int64_t j = j0; j < j0 + unit; ++j) hr[j] = xr[j] * r * w[j];
          }
        }
        // Quantized after the norms rather than unit by unit inside them, so that
        // a profile times the two apart (the same values either way; the rows
        // are still in L1/L2).
        lap(prof::kNorm);
        for (int64_t i = i0; i < i1; ++i) quant_units(q, h.data(), i / nu, i % nu, i % nu + 1, buf);
        bar(prof::kQuant);
        if (pending) std::swap(xa, xb);
        pending = false;
      };
      for (size_t li = 0; li < layers_.size(); ++li) {
        const Layer& ly = layers_[li];
        add_norm(ly.attn_norm.data_ptr<float>(), ly.qkv);
        gemm_part(c, ly.qkv, buf, h.data(), qkv.data(), T, nullptr, &chunks[4 * li]);
        bar(prof::kQkv);
        // Bias, rotation, and the keys and values into the cache.
        c.split((int64_t)ropes.size(), i0, i1);
        for (int64_t i = i0; i < i1; ++i) {
          const RopeItem& it = ropes[i];
          const Segment& s = *it.s;
          float* kc = s.kv + li * 2 * Hkv_ * s.Lmax * D_;
          rope_and_store(qkv.data() + (it.r0 + it.t) * nqkv, ly.bqkv, kc, kc + Hkv_ * s.Lmax * D_,
                         it.t, it.g, s.pos, s.Lmax, s.tree ? *s.tree : chain);
        }
        bar(prof::kRope);
        // Attention, each item's output quantized for wo at once.
        c.split((int64_t)atts.size(), i0, i1);
        const int64_t ou = unit_of(ly.o), G = H_ / Hkv_;
        for (int64_t i = i0; i < i1; ++i) {
          const AttItem& it = atts[i];
          const Segment& s = *it.s;
          const float* kc = s.kv + li * 2 * Hkv_ * s.Lmax * D_;
          Shared sh;
          if (s.shared_kv != nullptr) {
            sh.k = s.shared_kv + li * 2 * Hkv_ * s.shared_Lmax * D_;
            sh.v = sh.k + Hkv_ * s.shared_Lmax * D_;
            sh.len = s.shared_len;
            sh.Lmax = s.shared_Lmax;
          }
          attention(qkv.data() + it.r0 * nqkv, kc, kc + Hkv_ * s.Lmax * D_, att.data() + it.r0 * HD,
                    it.g, it.t0, it.t1, s.pos, s.Lmax, s.tree ? *s.tree : chain, sh);
          lap(prof::kAttention);
          for (int64_t t = it.t0; t < it.t1; ++t)
            quant_units(ly.o, att.data(), it.r0 + t, it.g * G * D_ / ou, (it.g + 1) * G * D_ / ou,
                        buf);
          lap(prof::kQuant);
        }
        bar(prof::kAttention);
        gemm_part(c, ly.o, buf, att.data(), tmp.data(), T, nullptr, &chunks[4 * li + 1]);
        bar(prof::kO);
        pending = true;
        add_norm(ly.ffn_norm.data_ptr<float>(), ly.w13);
        gemm_part(c, ly.w13, buf, h.data(), gu.data(), T, nullptr, &chunks[4 * li + 2]);
        bar(prof::kW13);
        {  // act = silu(gate) · up, quantized for w2
          const int64_t unit = unit_of(ly.w2), nu = ffn / unit;
          c.split(T * nu, i0, i1);
          for (int64_t i = i0; i < i1; ++i) {
            const int64_t m = i / nu, u = i % nu;
            silu_mul(gu.data() + m * 2 * ffn, act.data() + m * ffn, ffn, u * unit, (u + 1) * unit);
          }
          lap(prof::kSilu);
          for (int64_t i = i0; i < i1; ++i) quant_units(ly.w2, act.data(), i / nu, i % nu, i % nu + 1, buf);
        }
        bar(prof::kQuant);
        gemm_part(c, ly.w2, buf, act.data(), tmp.data(), T, nullptr, &chunks[4 * li + 3]);
        bar(prof::kW2);
        pending = true;
      }
      // The final norm of the rows the head or a normed buffer reads.
      {
        const float* nw = norm_.data_ptr<float>();
        const int64_t unit = unit_of(head_), nu = dim / unit, n = (int64_t)outs.size();
        c.split(n * nu, i0, i1);
        int64_t row = -1;
        float r = 0.0f;
        for (int64_t i = i0; i < i1; ++i) {
          const OutRow& orow = outs[i / nu];
          const int64_t j0 = (i % nu) * unit;
          const float* xr = xa + orow.src * dim;
          const float* ar = pending ? tmp.data() + orow.src * dim : nullptr;
          if (i / nu != row) {
            r = rms_factor(xr, ar, dim, eps_);
            row = i / nu;
          }
          float vals[64];
          for (int64_t j = j0; j < j0 + unit; ++j) {
            const float v = ar != nullptr ? xr[j] + ar[j] : xr[j];
            vals[j - j0] = v * r * nw[j];
          }
          if (orow.normed != nullptr) std::memcpy(orow.normed + j0, vals, unit * sizeof(float));
          if (orow.head >= 0) std::memcpy(&head_in[orow.head * dim + j0], vals, unit * sizeof(float));
        }
        lap(prof::kNorm);
        for (int64_t i = i0; i < i1; ++i)
          if (outs[i / nu].head >= 0)
            quant_units(head_, head_in.data(), outs[i / nu].head, i % nu, i % nu + 1, buf);
      }
      bar(prof::kQuant);
      gemm_part(c, head_, buf, head_in.data(), lp, rows, best ? &am : nullptr,
                &chunks[4 * layers_.size()]);
      if (best) {
        bar(prof::kHead);
        if (c.tid == 0) am.merge(c.nt, best);
        lap(prof::kOther);
      } else {
        lap(prof::kHead);
      }
    });
    if (prof_.on) {  // member 0's wall time beyond its laps (waking the team, its end) is kOther
      const int64_t wall = prof::now_ns() - t_start;
      prof_.row[0].ns[prof::kOther] += wall - (prof_.row[0].total() - laps0);
      prof_.passes += 1;
      prof_.rows += T;
      prof_.members = std::max<int64_t>(prof_.members, std::min(nt, prof::kMembers));
      prof_.wall_ns += wall;
    }
    return logits;
  }

  // Row t's bias, then its Q heads of KV group g and its K head g rotated
  // (interleaved pairs) by its position (pos + depth), Q scaled by 1/sqrt(D)
  // as the reference does; K and V head g go into the row's slot (pos + t).
  void rope_and_store(float* r, const torch::Tensor& bias, float* kc, float* vc, int64_t t,
                      int64_t g, int64_t pos, int64_t Lmax, const Tree& tree) const {
    const int64_t half = D_ / 2, G = H_ / Hkv_;
    const float scale = 1.0f / std::sqrt((float)D_);
    const float* c = cos_.data_ptr<float>() + (pos + tree.depth(t)) * half;
    const float* s = sin_.data_ptr<float>() + (pos + tree.depth(t)) * half;
    if (bias.numel()) {
      const float* b = bias.data_ptr<float>();
      auto add = [&](int64_t hd) {
        for (int64_t i = 0; i < D_; ++i) r[hd * D_ + i] += b[hd * D_ + i];
      };
      for (int64_t hd = g * G; hd < (g + 1) * G; ++hd) add(hd);
      add(H_ + g);
      add(H_ + Hkv_ + g);
    }
    auto rotate = [&](int64_t hd, bool q) {
      float* v = r + hd * D_;
      for (int64_t i = 0; i < half; ++i) {
        const float a = v[2 * i], b = v[2 * i + 1];
        v[2 * i] = a * c[i] - b * s[i];
        v[2 * i + 1] = a * s[i] + b * c[i];
      }
      if (q)
        for (int64_t i = 0; i < D_; ++i) v[i] *= scale;
    };
    for (int64_t hd = g * G; hd < (g + 1) * G; ++hd) rotate(hd, true);
    rotate(H_ + g, false);
    std::memcpy(kc + (g * Lmax + pos + t) * D_, r + (H_ + g) * D_, D_ * sizeof(float));
    std::memcpy(vc + (g * Lmax + pos + t) * D_, r + (H_ + Hkv_ + g) * D_, D_ * sizeof(float));
  }

  // Causal attention of KV head g's query heads for a segment's rows [t0, t1): row t sees positions [0, pos + depth(t)]: the cache up
  // to pos - 1, then its path's rows (a chain: slots pos..pos+t).
  //
  // Why this loop order: the G query heads that share a KV head, over up to
  // 16 rows at a time, walk that head's keys and values together, a block of
  // 16 keys at a time, so each block is fetched once per pass and then served
  // from L1 to every query. One query at a time re-read the head's cache for
  // each query head and each row, and a one-token step stalled on those
  // loads at long contexts (perf). Each query's arithmetic (its scores' FMA
  // order, the softmax, the order of its Σ_j p_j·v_j) is the same whatever
  // the blocking and however many rows come along, so rows stay bit-identical
  // to one-token steps.
  void attention(const float* qkv, const float* kc, const float* vc, float* out, int64_t g, int64_t t0, int64_t t1, int64_t pos, int64_t Lmax, const Tree& tree,
                 const Shared& sh) const {
    const int64_t G = H_ / Hkv_;
    thread_local std::vector<float> sc, inv;  // reused: a prefill tile's scores are G·16·pos floats
    sc.resize(G * (t1 - t0) * (pos + t1));
    inv.resize(G * (t1 - t0));
    attend_tile(qkv, kc, vc, out, g, t0, t1, pos, Lmax, tree, sc.data(), inv.data(), sh);
  }

  // attention() for KV head g and rows [t0, t1); sc holds (t1 - t0)·G rows of
  // scores (stride pos + t1), inv their 1 / Σ weights. Key j of row t is
  // slot j up to pos, then its path's slots (Tree::slot): where they are not
  // consecutive (a tree's side branch), that row's last key block is gathered
  // into a contiguous copy, and read exactly as a decode reads the cache.
  void attend_tile(const float* qkv, const float* kc, const float* vc, float* out, int64_t g,
                   int64_t t0, int64_t t1, int64_t pos, int64_t Lmax, const Tree& tree,
                   float* sc, float* inv, const Shared& sh) const {
    constexpr int64_t kKeys = kKeyBlock;  // 16 rows of K (or V), 4 KB at D = 64
    constexpr int64_t kAhead = 2;  // blocks prefetched ahead (the cache streams from L3)
    const int64_t nqkv = (H_ + 2 * Hkv_) * D_, G = H_ / Hkv_, D = D_, n_all = pos + t1;
    const float* K = kc + g * Lmax * D;
    const float* Vv = vc + g * Lmax * D;
    // Blocks below sh.len come from the shared cache (whole blocks: sh.len is a
    // multiple of kKeys, and at most pos, so a tree never gathers there).
    const float* Ksh = sh.k ? sh.k + g * sh.Lmax * D : K;
    const float* Vsh = sh.v ? sh.v + g * sh.Lmax * D : Vv;
    auto kbase = [&](int64_t j0) { return j0 < sh.len ? Ksh : K; };
    auto vbase = [&](int64_t j0) { return j0 < sh.len ? Vsh : Vv; };
    auto row = [&](int64_t t, int64_t h) { return sc + ((t - t0) * G + h) * n_all; };
    auto keys = [&](int64_t t) { return pos + tree.depth(t) + 1; };  // row t attends to
    // Rows [j0, j0 + cnt) of row t's keys (or values) in base: the cache itself
    // where they are consecutive slots, else a gathered copy in buf.
    thread_local std::vector<float> gather;
    gather.resize(kKeys * D);
    auto block = [&](const float* base, int64_t t, int64_t j0, int64_t cnt) {
      if (tree.straight(t) || j0 + cnt <= pos + 1) return base + j0 * D;
      for (int64_t r = 0; r < cnt; ++r)
        std::memcpy(&gather[r * D], base + tree.slot(t, j0 + r, pos) * D, D * sizeof(float));
      return (const float*)gather.data();
    };
    for (int64_t j0 = 0; j0 < n_all; j0 += kKeys) {
      prefetch_rows(kbase(j0 + kAhead * kKeys), j0 + kAhead * kKeys, n_all, D);
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t cnt = std::min<int64_t>(kKeys, keys(t) - j0);
        if (cnt <= 0) continue;
        const float* kb = block(kbase(j0), t, j0, cnt);
        for (int64_t h = 0; h < G; ++h) {
          const float* q = qkv + t * nqkv + (g * G + h) * D;
          F16 acc[16];
          for (int r = 0; r < 16; ++r) acc[r] = simd::zero();
#if VP_AVX512
          // d outer, keys inner: 16 independent FMA chains instead of one
          // 4-deep chain per key (latency-bound); each key's sum keeps its order.
          if (cnt == 16) {
            for (int64_t d = 0; d < D; d += 16) {
              const F16 qv = simd::load(q + d);
              for (int r = 0; r < 16; ++r) acc[r] = simd::fmadd(qv, simd::load(kb + r * D + d), acc[r]);
            }
          } else {
            for (int64_t d = 0; d < D; d += 16) {
              const F16 qv = simd::load(q + d);
              for (int r = 0; r < cnt; ++r) acc[r] = simd::fmadd(qv, simd::load(kb + r * D + d), acc[r]);
            }
          }
#else
          // AVX2: those 16 accumulators would be 32 ymm registers of its 16, so
          // most of them lived on the stack, a load and a store around each FMA.
          // Keys outer, d inner instead: one accumulator live, its lanes summed
          // over d in the same order as above (the same bits); the keys' short
          // chains overlap out of order.
          for (int r = 0; r < cnt; ++r) {
            F16 a = simd::zero();
            for (int64_t d = 0; d < D; d += 16)
              a = simd::fmadd(simd::load(q + d), simd::load(kb + r * D + d), a);
            acc[r] = a;
          }
#endif
          simd::store_tail(row(t, h) + j0, hsum16(acc), cnt);
        }
      }
    }
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t h = 0; h < G; ++h) {
        inv[(t - t0) * G + h] = softmax_weights(row(t, h), keys(t));
        std::memset(out + (t * H_ + g * G + h) * D, 0, D * sizeof(float));
      }
    // Σ_j p_j·v_j in j order per query: 4 accumulators per 64 dims, kept in
    // `out` between key blocks (an fp32 store and load change no bits).
    for (int64_t j0 = 0; j0 < n_all; j0 += kKeys) {
      prefetch_rows(vbase(j0 + kAhead * kKeys), j0 + kAhead * kKeys, n_all, D);
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t j1 = std::min<int64_t>(j0 + kKeys, keys(t));
        if (j1 <= j0) continue;
        // The block's values from vb[0, j1 - j0), their weights from row(t, h) + j0.
        const float* vb = block(vbase(j0), t, j0, j1 - j0);
        // The row's G heads together (3 at a time): their FMA chains interleave
        // and share each V load.
        for (int64_t h = 0; h < G; h += 3) {
          float* o = out + (t * H_ + g * G + h) * D;
          const float* p = row(t, h) + j0;
          switch (std::min<int64_t>(3, G - h)) {
            case 3: pv_block<3>(p, n_all, o, D, vb, 0, j1 - j0); break;
            case 2: pv_block<2>(p, n_all, o, D, vb, 0, j1 - j0); break;
            default: pv_block<1>(p, n_all, o, D, vb, 0, j1 - j0); break;
          }
        }
      }
    }
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t h = 0; h < G; ++h) {
        float* o = out + (t * H_ + g * G + h) * D;
        const F16 iv = simd::set1(inv[(t - t0) * G + h]);
        for (int64_t d = 0; d < D; d += 16) simd::store(o + d, simd::mul(simd::load(o + d), iv));
      }
  }

 public:
  // One thread by default: decode is memory-bound, and with the other core busy
  // (other stages, other sessions) each parallel region waits for a thread
  // the OS has parked: measured here at load 1.6–5, 2 threads were 1.5–2x
  // slower than 1. It also leaves the other core to the ASR and TTS stages.
  int threads_ = 1;

 private:
  int64_t H_, Hkv_, D_, dim_ = 0, ffn_ = 0;
  float eps_;
  torch::Tensor embed_, norm_, cos_, sin_;
  std::vector<Layer> layers_;
  QW head_;
  QW fc_;  // an EAGLE draft's input projection (set_input_proj), else empty
 public:
  prof::Table prof_;  // where passes' time goes, while prof_.on (profile.h)

 private:
  torch::Tensor fc_bias_;
};

}  // namespace

// The matrix kernel the fused step uses, exposed for tests against reference.py.
// best (optional, int64 (M,)): each row's argmax, as the head's product finds it.
torch::Tensor gemm(torch::Tensor x, std::vector<torch::Tensor> matrix,
                   std::optional<torch::Tensor> best) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat && x.is_contiguous(),
              "x must be a contiguous (M, K) float32 tensor");
  const QW q = make_qw(matrix);
  TORCH_CHECK(x.size(1) == q.k, "x and w disagree on K");
  TORCH_CHECK(!best || (best->scalar_type() == torch::kLong && best->is_contiguous() &&
                        best->numel() == x.size(0)),
              "best must be a contiguous int64 tensor with one entry per row of x");
  auto y = torch::empty({x.size(0), q.n}, x.options());
  matmul(q, x.data_ptr<float>(), y.data_ptr<float>(), x.size(0), at::get_num_threads(),
         best ? best->data_ptr<int64_t>() : nullptr);
  return y;
}

// This host's memory read rate through the passes' own team of threads: a plain streaming
// read, the yardstick `bench llm --profile` puts beside each matrix's GB/s (a memory-bound
// pass can beat it only by a little: the matrices' own prefetching gets 12.5 GB/s on one
// thread where this gets 11.5-11.9). Each member streams its even share of buf in
// 128-byte steps, xor-folding the loads so that only the loads bound the loop (prefetching
// 4 KB ahead, as the matrices do, made this loop slower: 10.0-10.8 GB/s on one thread).
// Returns the fastest pass's seconds.
double read_seconds(torch::Tensor buf, int64_t threads, int64_t passes) {
  TORCH_CHECK(buf.scalar_type() == torch::kByte && buf.is_contiguous() && buf.numel() > 0 &&
                  buf.numel() % 128 == 0 && (uintptr_t)buf.data_ptr() % 32 == 0,
              "buf must be a contiguous, 32-byte aligned uint8 tensor of whole 128-byte steps");
  TORCH_CHECK(threads >= 1 && passes >= 1, "threads and passes must be >= 1");
  const uint8_t* base = buf.data_ptr<uint8_t>();
  const int64_t steps = buf.numel() / 128;
  std::atomic<uint64_t> sink{0};  // (an atomic side effect: the loads are not dead code)
  double best = INFINITY;
  for (int64_t i = 0; i < passes; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    team::Pool::get().run((int)threads, [&](team::Ctx& c) {
      int64_t b, e;
      c.split(steps, b, e);
      __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
      for (int64_t j = b; j < e; ++j) {
        const __m256i* q = (const __m256i*)(base + j * 128);
        a0 = _mm256_xor_si256(a0, _mm256_load_si256(q));
        a1 = _mm256_xor_si256(a1, _mm256_load_si256(q + 1));
        a2 = _mm256_xor_si256(a2, _mm256_load_si256(q + 2));
        a3 = _mm256_xor_si256(a3, _mm256_load_si256(q + 3));
      }
      const __m256i a = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
      sink.fetch_xor((uint64_t)_mm256_extract_epi64(a, 0), std::memory_order_relaxed);
    });
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    best = std::min(best, dt.count());
  }
  return best;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  // The instruction set the kernel was built for ("avx512": AVX-512 VNNI; "avx2").
  m.attr("isa") = simd::kAvx512 ? "avx512" : "avx2";
  m.def("gemm", &gemm,
        "the fused step's y = x @ Wᵀ, W given as [w, scale] (int8) or [nibbles, d, m] (q4); "
        "best: each row's argmax",
        pybind11::arg("x"), pybind11::arg("matrix"), pybind11::arg("best") = std::nullopt);
  m.def("read_seconds", &read_seconds,
        "the fastest of passes reads of buf (aligned uint8) by threads team members, s",
        pybind11::arg("buf"), pybind11::arg("threads"), pybind11::arg("passes"),
        pybind11::call_guard<pybind11::gil_scoped_release>());
  pybind11::class_<Model>(m, "Model")
      .def(pybind11::init<int64_t, int64_t, int64_t, double, torch::Tensor, torch::Tensor,
                          torch::Tensor, torch::Tensor, std::vector<std::vector<torch::Tensor>>,
                          std::vector<std::vector<std::vector<torch::Tensor>>>,
                          std::vector<torch::Tensor>>())
      .def("forward", &Model::forward, "logits of tokens fed at pos (best: their argmax rows)",
           pybind11::arg("tokens"), pybind11::arg("kv"), pybind11::arg("pos"),
           pybind11::arg("last_only"), pybind11::arg("best") = std::nullopt,
           pybind11::arg("threads") = 0, pybind11::call_guard<pybind11::gil_scoped_release>())
      .def_readwrite("threads", &Model::threads_, "threads of a step (default 1)")
      .def("forward_into", &Model::forward_into,
           "forward() writing the fed rows' final-normed hidden states into feats[pos:pos+T]; "
           "parents: the rows' tree (row t follows row parents[t]; [] for a chain)",
           pybind11::arg("tokens"), pybind11::arg("kv"), pybind11::arg("pos"),
           pybind11::arg("last_only"), pybind11::arg("feats"),
           pybind11::arg("parents") = std::vector<int64_t>{}, pybind11::arg("best") = std::nullopt,
           pybind11::arg("threads") = 0, pybind11::call_guard<pybind11::gil_scoped_release>())
      .def("forward_batch", &Model::forward_batch,
           "several callers' rows in one pass, each segment its own cache, positions, "
           "feats and tree; logits of every row (the last only where last_only)",
           pybind11::arg("tokens"), pybind11::arg("kvs"), pybind11::arg("pos"),
           pybind11::arg("counts"), pybind11::arg("last_only"), pybind11::arg("feats"),
           pybind11::arg("parents"), pybind11::arg("best") = std::nullopt,
           pybind11::arg("threads") = 0, pybind11::arg("shared_ref") = std::vector<int64_t>{},
           pybind11::arg("shared_len") = std::vector<int64_t>{},
           pybind11::call_guard<pybind11::gil_scoped_release>())
      .def("profile", &Model::profile,
           "profile(True): clear the pass-time table and sum later passes into it; "
           "profile(False): stop")
      .def("profile_table", &Model::profile_table,
           "the pass-time table: passes, rows, wall_ms, per member {phase: ms}, weight_bytes")
      .def("set_input_proj", &Model::set_input_proj, "an EAGLE draft's fc: [matrix], bias")
      .def("eagle_step", &Model::eagle_step,
           "one EAGLE draft step: (output feature, the 3 likeliest rows, their probabilities)",
           pybind11::call_guard<pybind11::gil_scoped_release>());
}
