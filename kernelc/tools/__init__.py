"""Host-side helpers, mirroring ``triton.tools`` (``kernelc.tools.tensor_descriptor.TensorDescriptor``)."""
