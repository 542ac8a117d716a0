// The inference fast paths of nn.MultiheadAttention
// (_native_multi_head_attention) and nn.TransformerEncoderLayer
// (_transformer_encoder_layer_fwd), which PyTorch takes on every device it
// lists as supported (cpu, cuda and ours) in evaluation mode without
// gradients. They are the ATen ops they are made of: projections, a masked
// softmax and layer norms, each lowered natively, so a compiled graph fuses
// them like any attention written out.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

namespace torch_tpu {
namespace {

// [B, T, D] -> [B, H, T, D / H]
at::Tensor split_heads(const at::Tensor& x, int64_t heads) {
  return x.view({x.size(0), x.size(1), heads, x.size(2) / heads}).transpose(1, 2);
}

// softmax over the last dim of scores [B, H, T, S] with positions where
// |mask| is true left out. mask_type: 0 = [T, S], 1 = key padding [B, S],
// 2 = [B, H or 1, T, S]; a floating mask is added to the scores. A row with
// every position masked gives zeros where the weights are returned
// (PyTorch's _masked_softmax) and NaN where they are not (the CPU kernel
// then adds the mask as -inf, as scaled_dot_product_attention's math does).
at::Tensor masked_softmax(const at::Tensor& scores, const std::optional<at::Tensor>& mask,
                          std::optional<int64_t> mask_type, bool zero_masked_rows) {
  if (!mask || !mask->defined()) return at::softmax(scores, -1);
  at::Tensor m = *mask;
  if (mask_type == 1) m = m.view({scores.size(0), 1, 1, scores.size(3)});
  if (m.scalar_type() != at::kBool) return at::softmax(scores + m.to(scores.scalar_type()), -1);
  auto p = at::softmax(scores.masked_fill(m, -std::numeric_limits<double>::infinity()), -1);
  return zero_masked_rows ? p.masked_fill(m, 0) : p;
}

void check_mha(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
               int64_t embed_dim, int64_t num_head, const at::Tensor& qkv_weight,
               const at::Tensor& qkv_bias) {
  TORCH_CHECK(query.dim() == 3 && key.dim() == 3 && value.dim() == 3,
              "_native_multi_head_attention: expected 3-D query, key and value, got ",
              query.sizes(), ", ", key.sizes(), ", ", value.sizes());
  TORCH_CHECK(query.size(2) == embed_dim && key.size(2) == embed_dim &&
                  value.size(2) == embed_dim && key.sizes() == value.sizes() &&
                  key.size(0) == query.size(0),
              "_native_multi_head_attention: query ", query.sizes(), ", key ", key.sizes(),
              " and value ", value.sizes(), " do not fit embed_dim ", embed_dim);
  TORCH_CHECK(num_head > 0 && embed_dim % num_head == 0,
              "_native_multi_head_attention: embed_dim ", embed_dim,
              " is not divisible by num_head ", num_head);
  TORCH_CHECK(qkv_weight.dim() == 2 && qkv_weight.size(0) == 3 * embed_dim &&
                  qkv_weight.size(1) == embed_dim && qkv_bias.dim() == 1 &&
                  qkv_bias.size(0) == 3 * embed_dim,
              "_native_multi_head_attention: expected qkv_weight [", 3 * embed_dim, ", ",
              embed_dim, "] and qkv_bias [", 3 * embed_dim, "], got ", qkv_weight.sizes(),
              " and ", qkv_bias.sizes());
}

std::tuple<at::Tensor, at::Tensor> native_multi_head_attention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim,
    int64_t num_head, const at::Tensor& qkv_weight, const at::Tensor& qkv_bias,
    const at::Tensor& proj_weight, const at::Tensor& proj_bias,
    const std::optional<at::Tensor>& mask, bool need_weights, bool average_attn_weights,
    std::optional<int64_t> mask_type) {
  check_mha(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias);
  auto w = qkv_weight.chunk(3, 0);
  auto b = qkv_bias.chunk(3, 0);
  // q is scaled before the product, as the CPU kernel does
  double scale = 1.0 / std::sqrt(static_cast<double>(embed_dim / num_head));
  auto q = split_heads(at::linear(query, w[0], b[0]).mul(scale), num_head);
  auto k = split_heads(at::linear(key, w[1], b[1]), num_head);
  auto v = split_heads(at::linear(value, w[2], b[2]), num_head);
  auto attn = masked_softmax(at::matmul(q, k.transpose(-2, -1)), mask, mask_type, need_weights);
  auto ctx = at::matmul(attn, v).transpose(1, 2).reshape({query.size(0), query.size(1), embed_dim});
  auto out = at::linear(ctx, proj_weight, proj_bias);
  if (!need_weights) return {out, at::Tensor()};
  return {out, average_attn_weights ? attn.sum(1).div(num_head) : attn};
}

at::Tensor transformer_encoder_layer_fwd(
    const at::Tensor& src, int64_t embed_dim, int64_t num_heads, const at::Tensor& qkv_weight,
    const at::Tensor& qkv_bias, const at::Tensor& proj_weight, const at::Tensor& proj_bias,
    bool use_gelu, bool norm_first, double eps, const at::Tensor& norm_weight_1,
    const at::Tensor& norm_bias_1, const at::Tensor& norm_weight_2, const at::Tensor& norm_bias_2,
    const at::Tensor& ffn_weight_1, const at::Tensor& ffn_bias_1, const at::Tensor& ffn_weight_2,
    const at::Tensor& ffn_bias_2, const std::optional<at::Tensor>& mask,
    std::optional<int64_t> mask_type) {
  auto norm = [&](const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
    return at::layer_norm(x, {embed_dim}, weight, bias, eps);
  };
  auto x = norm_first ? norm(src, norm_weight_1, norm_bias_1) : src;
  x = std::get<0>(native_multi_head_attention(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias,
                                              proj_weight, proj_bias, mask, false, true,
                                              mask_type)) + src;
  if (!norm_first) x = norm(x, norm_weight_1, norm_bias_1);
  auto h = norm_first ? norm(x, norm_weight_2, norm_bias_2) : x;
  h = at::linear(h, ffn_weight_1, ffn_bias_1);
  h = use_gelu ? at::gelu(h) : at::relu(h);
  x = at::linear(h, ffn_weight_2, ffn_bias_2) + x;
  return norm_first ? x : norm(x, norm_weight_2, norm_bias_2);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_native_multi_head_attention", native_multi_head_attention);
  m.impl("_transformer_encoder_layer_fwd", transformer_encoder_layer_fwd);
}

}  // namespace torch_tpu
