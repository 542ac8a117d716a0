"""Printing a tpu tensor is a sync point: copy it to the host once, then
format there. PyTorch's formatter otherwise runs a dozen small device ops
(masked_select, abs, ...) to format the numbers; it does the same host copy
for xla/lazy/ipu tensors, but keys that on a fixed list of device names."""
import torch
import torch._tensor_str as tensor_str

_original_str = tensor_str._str


def _str(self, *, tensor_contents=None):
    if (tensor_contents is None and self.device.type == "tpu" and self.layout == torch.strided
            and not self.is_nested and type(self) in (torch.Tensor, torch.nn.Parameter)):
        with torch.no_grad():
            host = self.detach().to("cpu")
        tensor_contents = tensor_str._tensor_str(host, len("tensor("))
    return _original_str(self, tensor_contents=tensor_contents)


def install():
    if tensor_str._str is not _str:
        tensor_str._str = _str
