"""A mean-pooling sentence-transformers model run by ONNX Runtime (the ``onnx`` extra)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ctxmgmt.components.pooling_encoder import PoolingEncoder, example_batch, hidden_states_module
from ctxmgmt.messages.exceptions import ComponentError


def export_onnx(model: Any) -> bytes:
    """The transformer of a loaded sentence-transformers ``model`` as an ONNX graph, in memory.

    TorchScript-based exporter, opset 17: inputs ``ids`` and ``mask``, output ``hidden`` (the
    last hidden states), batch and token axes dynamic. :class:`OnnxEncoder` runs it;
    ``benchmarks/query_encoder.py`` times it.
    """
    import io

    import torch

    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            hidden_states_module(model),
            example_batch(),
            buffer,  # type: ignore[arg-type]  # the TorchScript exporter writes to file objects
            input_names=["ids", "mask"],
            output_names=["hidden"],
            dynamic_axes={name: {0: "batch", 1: "tokens"} for name in ("ids", "mask", "hidden")},
            opset_version=17,
            dynamo=False,
        )
    return buffer.getvalue()


class OnnxEncoder(PoolingEncoder):
    """A mean-pooling sentence-transformers model run by ONNX Runtime (CPU).

    The transformer is exported in memory from the loaded weights (TorchScript-based
    exporter, opset 17, nothing read or written on disk) and run with every graph
    optimisation on, ``torch.get_num_threads()`` intra-op threads and no thread spinning
    between calls. Vectors equal the float model's within 1e-6 (max abs difference 1.9e-7,
    min cosine 1.000000 on 200 LoCoMo dev turns), so states built by either backend mix.
    It is built once per process and model path: export and session took 10-24 s on 2
    busy CPU cores (load average 7-8; ``benchmarks/encoder.py``), and the export holds a
    serialised copy of the weights (90 MB) meanwhile. ``InferenceSession.run`` is thread-safe.
    """

    def __init__(self, model: Any) -> None:
        import torch

        try:
            import onnxruntime
        except ImportError as exc:
            raise ComponentError(
                "the ONNX Runtime backend needs onnxruntime and onnx: pip install 'ctxmgmt[onnx]'"
            ) from exc
        super().__init__(model)
        graph = export_onnx(model)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = torch.get_num_threads()
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(graph, options, providers=["CPUExecutionProvider"])

    def _hidden(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return np.asarray(self.session.run(None, {"ids": ids, "mask": mask})[0])
