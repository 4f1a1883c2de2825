# On Hopper (compute capability 9.0) build for sm_90a, whose wgmma runs the tensor cores at twice
# mma.sync's rate. Recent PyTorch (2.11 checked) then adds no architecture flags of its own; 2.1 adds
# those of TORCH_CUDA_ARCH_LIST or of the visible GPU beside it (sm_90 too, the mma.sync path: which of the
# two an H100 runs is then the driver's choice; both are exact). Other GPUs: PyTorch's defaults.
# VARIANTS_NO_SM90A=1 builds the mma.sync path on Hopper too, under its own name (the tests run it so).
_no_sm90a = os.environ.get("VARIANTS_NO_SM90A") == "1"
_hopper = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0) and not _no_sm90a
