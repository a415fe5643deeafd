"""SEGMENT family on the neuron device against PyTorch's CPU: nll_loss
(1-d to spatial) / cross_entropy, masked_scatter, index_reduce / index_copy / take /
put, embedding_bag, cdist / pdist, margin losses, segment_reduce, ctc_loss,
and the compositions (trace, addbmm, renorm, channel_shuffle, logspace,
random distributions).
Every test also checks that nothing fell back to the CPU. Tolerances:
helpers.TOL_ACCUMULATED (integer results exact)."""
import pytest
import torch
import torch.nn.functional as F

from helpers import DEV, TOL_ACCUMULATED, assert_no_fallbacks, raises_like_cpu


def both(fn, *args, dtype=torch.float32, grad=True, rtol=None, atol=None):
    """Runs fn on CPU and neuron copies of args; compares outputs and the
    gradients of the floating args."""
    r, a = TOL_ACCUMULATED.get(dtype, (0, 0))
    rtol, atol = rtol if rtol is not None else r, atol if atol is not None else a
    cpu = [x.clone().requires_grad_(grad and x.is_floating_point()) if isinstance(x, torch.Tensor) else x
           for x in args]
    dev = [x.detach().to(DEV).requires_grad_(grad and x.is_floating_point()) if isinstance(x, torch.Tensor) else x
           for x in args]
    out_c, out_d = fn(*cpu), fn(*dev)
    torch.testing.assert_close(out_d.cpu(), out_c, rtol=rtol, atol=atol)
    if grad and out_c.requires_grad:
        g = torch.randn_like(out_c)
        out_c.backward(g)
        out_d.backward(g.to(DEV))
        for c, d in zip(cpu, dev):
            if isinstance(c, torch.Tensor) and c.requires_grad:
                torch.testing.assert_close(d.grad.cpu(), c.grad, rtol=rtol, atol=atol)
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_spatial(dtype, reduction):
    x = torch.randn(2, 5, 3, 4, dtype=dtype)
    t = torch.randint(0, 5, (2, 3, 4))
    t[0, 1, 2] = -100
    w = torch.rand(5, dtype=dtype) + 0.5
    both(lambda x: F.cross_entropy(x, t.to(x.device), weight=w.to(x.device), reduction=reduction), x, dtype=dtype)
    both(lambda x: F.nll_loss(x.log_softmax(1), t.to(x.device), ignore_index=-100, reduction=reduction), x, dtype=dtype)
    # 3-d and 5-d inputs go through the same 4-d op
    x3 = torch.randn(3, 4, 7, dtype=dtype)
    t3 = torch.randint(0, 4, (3, 7))
    both(lambda x: F.cross_entropy(x, t3.to(x.device), reduction=reduction), x3, dtype=dtype)


def test_nll_loss2d_errors():
    x = torch.randn(2, 3, 4, 4, device=DEV)
    with pytest.raises(IndexError, match="Target 7 is out of bounds"):  # the CPU's class, when read back
        F.nll_loss(x, torch.full((2, 4, 4), 7, device=DEV)).cpu()
    with pytest.raises(RuntimeError, match="spatial sizes don't match|size mismatch"):
        F.nll_loss(x, torch.zeros(2, 4, 5, dtype=torch.long, device=DEV))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_masked_scatter(dtype):
    x = torch.randn(4, 5).to(dtype)
    mask = torch.rand(4, 5) > 0.4
    src = torch.randn(30).to(dtype)
    out = x.to(DEV).masked_scatter(mask.to(DEV), src.to(DEV))
    torch.testing.assert_close(out.cpu(), x.masked_scatter(mask, src))
    # broadcast mask, and masked_select's backward (a masked_scatter)
    m1 = torch.tensor([True, False, True, True, False])
    torch.testing.assert_close(x.to(DEV).masked_scatter(m1.to(DEV), src.to(DEV)).cpu(), x.masked_scatter(m1, src))
    if dtype.is_floating_point:
        both(lambda a: a.masked_select(mask).sum(), x, dtype=dtype)
    assert_no_fallbacks()
    with pytest.raises(RuntimeError, match="at least"):
        x.to(DEV).masked_scatter(torch.ones(4, 5, dtype=torch.bool, device=DEV), src[:3].to(DEV))


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_index_reduce(reduce, include_self, dtype):
    x = (torch.randn(5, 3) * 4).to(dtype)
    src = (torch.randn(6, 3) * 4).to(dtype)
    idx = torch.tensor([0, 4, 2, 0, 4, 4])
    want = x.index_reduce(0, idx, src, reduce, include_self=include_self)
    got = x.to(DEV).index_reduce(0, idx.to(DEV), src.to(DEV), reduce, include_self=include_self)
    torch.testing.assert_close(got.cpu(), want)
    want1 = x.index_reduce(1, torch.tensor([2, 0]), src[:5, :2], reduce, include_self=include_self)
    got1 = x.to(DEV).index_reduce(1, torch.tensor([2, 0], device=DEV), src[:5, :2].to(DEV), reduce,
                                  include_self=include_self)
    torch.testing.assert_close(got1.cpu(), want1)
    assert_no_fallbacks()


def test_index_copy_take_put():
    x = torch.randn(5, 4)
    src = torch.randn(5, 2)
    idx = torch.tensor([3, 0])
    torch.testing.assert_close(x.to(DEV).index_copy(1, idx.to(DEV), src.to(DEV)).cpu(), x.index_copy(1, idx, src))
    ti = torch.tensor([[0, -1], [7, 19]])
    torch.testing.assert_close(torch.take(x.to(DEV).t(), ti.to(DEV)).cpu(), torch.take(x.t(), ti))
    for acc in (False, True):
        pi = torch.tensor([1, 5, 1, -2]) if acc else torch.tensor([1, 5, 0, -2])
        v = torch.randn(4)
        want = x.clone().put_(pi, v, accumulate=acc)
        got = x.to(DEV).put_(pi.to(DEV), v.to(DEV), accumulate=acc)
        torch.testing.assert_close(got.cpu(), want)
        xt = x.t().contiguous().t()  # non-contiguous self
        got_nc = xt.to(DEV).t().contiguous().t().put_(pi.to(DEV), v.to(DEV), accumulate=acc)
        torch.testing.assert_close(got_nc.cpu(), xt.clone().put_(pi, v, accumulate=acc))
    both(lambda a, s: a.index_copy(0, torch.tensor([1, 3], device=a.device), s), x, torch.randn(2, 4))
    both(lambda a: torch.take(a, torch.tensor([0, 3, 3], device=a.device)), x)
    assert_no_fallbacks()
    with pytest.raises(RuntimeError, match="same number of elements"):
        x.to(DEV).put_(pi.to(DEV), torch.randn(3, device=DEV))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_embedding_bag(mode, dtype):
    w = torch.randn(12, 5, dtype=dtype)
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 11, 0])
    off = torch.tensor([0, 4, 4, 7])
    both(lambda w: F.embedding_bag(idx.to(w.device), w, off.to(w.device), mode=mode), w, dtype=dtype)
    both(lambda w: F.embedding_bag(idx.to(w.device), w, off.to(w.device), mode=mode, padding_idx=4), w, dtype=dtype)
    # include_last_offset: the extra offset is the number of indices (the documented contract)
    last = torch.tensor([0, 4, 4, 7, 10])
    both(lambda w: F.embedding_bag(idx.to(w.device), w, last.to(w.device), mode=mode, include_last_offset=True), w,
         dtype=dtype)
    both(lambda w: F.embedding_bag(idx.reshape(2, 5).to(w.device), w, mode=mode), w, dtype=dtype)
    if mode == "sum":
        psw = torch.randn(10, dtype=dtype)
        both(lambda w, p: F.embedding_bag(idx.to(w.device), w, off.to(w.device), per_sample_weights=p,
                                          mode="sum", padding_idx=2), w, psw, dtype=dtype)
    # scale_grad_by_freq, indices without repeats (with repeats the CPU's
    # divisors do not follow the documented per-index frequency)
    uniq = torch.tensor([3, 1, 7, 0, 5])
    both(lambda w: F.embedding_bag(uniq.to(w.device), w, torch.tensor([0, 2], device=w.device), mode=mode,
                                   scale_grad_by_freq=mode != "max"), w, dtype=dtype)


def test_embedding_bag_errors():
    w = torch.randn(4, 3, device=DEV)
    with pytest.raises(RuntimeError, match="offsets\\[0\\] has to be 0"):
        F.embedding_bag(torch.tensor([0, 1], device=DEV), w, torch.tensor([1], device=DEV))
        torch.neuron.synchronize()
    with pytest.raises(RuntimeError, match="out of bounds"):
        F.embedding_bag(torch.tensor([0, 9], device=DEV), w, torch.tensor([0], device=DEV))
        torch.neuron.synchronize()
    with pytest.raises(RuntimeError, match="only supported for mode='sum'"):
        F.embedding_bag(torch.tensor([0, 1], device=DEV), w, torch.tensor([0], device=DEV), mode="mean",
                        per_sample_weights=torch.ones(2, device=DEV))


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, 0.5, float("inf")])
def test_cdist_pdist(p):
    x1 = torch.randn(2, 5, 4)
    x2 = torch.randn(1, 6, 4)  # broadcast batch
    x2[0, 1] = x1[0, 2]  # a zero distance
    if p == 0.0:
        both(lambda a, b: torch.cdist(a, b, p=p), x1, x2, grad=False)
    else:
        both(lambda a, b: torch.cdist(a, b, p=p), x1, x2)
    x = torch.randn(7, 3)
    both(lambda a: F.pdist(a, p=p), x, grad=p != 0.0)
    # the matmul path of cdist (more than 25 rows) stays native too
    both(lambda a, b: torch.cdist(a, b), torch.randn(30, 3), torch.randn(4, 3))


def test_margin_losses():
    x = torch.randn(4, 6)
    t = torch.tensor([0, 5, 2, 2])
    w = torch.rand(6) + 0.5
    for red in ("mean", "sum", "none"):
        for p in (1, 2):
            both(lambda a: F.multi_margin_loss(a, t.to(a.device), p=p, margin=0.7, weight=w.to(a.device),
                                               reduction=red), x)
        mt = torch.tensor([[3, 0, -1, 1, 1, 1], [0, 1, 2, 3, 4, 5], [-1, 2, 0, 0, 0, 0], [5, 5, -1, 0, 0, 0]])
        both(lambda a: F.multilabel_margin_loss(a, mt.to(a.device), reduction=red), x)
    both(lambda a: F.multi_margin_loss(a, torch.tensor(2, device=a.device)), torch.randn(5))
    with pytest.raises(RuntimeError, match="target out of range"):
        F.multi_margin_loss(x.to(DEV), torch.tensor([0, 6, 1, 1], device=DEV))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compositions(dtype):
    a = torch.randn(5, 5, dtype=dtype)
    both(torch.trace, a, dtype=dtype)
    torch.testing.assert_close(torch.trace(torch.arange(9).reshape(3, 3).to(DEV)).cpu(),
                               torch.trace(torch.arange(9).reshape(3, 3)))
    b1, b2, m = torch.randn(3, 4, 5, dtype=dtype), torch.randn(3, 5, 2, dtype=dtype), torch.randn(4, 2, dtype=dtype)
    both(lambda m, b1, b2: torch.addbmm(m, b1, b2, beta=0.5, alpha=2.0), m, b1, b2, dtype=dtype, rtol=5e-2,
         atol=5e-2)
    both(lambda a: torch.renorm(a, 2, 0, 1.5), a, dtype=dtype)
    both(lambda a: torch.renorm(a, 1, 1, 2.0), a, dtype=dtype)
    c = torch.randn(2, 6, 3, 2, dtype=dtype)
    both(lambda c: F.channel_shuffle(c, 3), c, dtype=dtype)
    for st, en, steps, base in [(0, 3, 4, 10.0), (-1.5, 2.5, 9, 2.0), (2, 2, 1, 3.0)]:
        torch.testing.assert_close(torch.logspace(st, en, steps, base, dtype=dtype, device=DEV).cpu(),
                                   torch.logspace(st, en, steps, base, dtype=dtype), rtol=TOL_ACCUMULATED[dtype][0],
                                   atol=TOL_ACCUMULATED[dtype][1])
    torch.testing.assert_close(torch.logspace(0, 6, 7, 10, dtype=torch.int64, device=DEV).cpu(),
                               torch.logspace(0, 6, 7, 10, dtype=torch.int64))
    assert_no_fallbacks()


def test_random_distributions():
    torch.manual_seed(0)
    n = 20000
    c = torch.empty(n, device=DEV).cauchy_(1.0, 2.0).cpu()
    assert abs(c.median().item() - 1.0) < 0.1
    g = torch.empty(n, device=DEV, dtype=torch.int64).geometric_(0.25).cpu()
    assert g.min().item() >= 1 and abs(g.float().mean().item() - 4.0) < 0.2
    ln = torch.empty(n, device=DEV, dtype=torch.bfloat16).log_normal_(0.5, 0.3).cpu()
    assert ln.min().item() > 0 and abs(ln.float().log().mean().item() - 0.5) < 0.02
    # sgn's backward builds an _efficientzerotensor
    both(torch.sgn, torch.randn(6))
    assert_no_fallbacks()
    with pytest.raises(RuntimeError, match="geometric_ expects p"):
        torch.empty(3, device=DEV).geometric_(1.5)


# ---- segment_reduce --------------------------------------------------------------------------

def both_nan(fn, x, dtype, grad_seed=0):
    """Like both() for one input, but NaN equals NaN (mean of an empty segment,
    NaN data)."""
    rtol, atol = TOL_ACCUMULATED[dtype]
    xc = x.clone().requires_grad_(True)
    xd = x.detach().to(DEV).requires_grad_(True)
    oc, od = fn(xc), fn(xd)
    torch.testing.assert_close(od.cpu(), oc, rtol=rtol, atol=atol, equal_nan=True)
    g = torch.randn(oc.shape, generator=torch.Generator().manual_seed(grad_seed)).to(dtype)
    oc.backward(g)
    od.backward(g.to(DEV))
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=rtol, atol=atol, equal_nan=True)
    assert_no_fallbacks()


def to_offsets(lengths, axis):
    shape = list(lengths.shape)
    shape[axis] = 1
    return torch.cat((lengths.new_zeros(shape), lengths), axis).cumsum(axis)


SEG_CASES = [
    # data shape, axis, lengths, unsafe
    ((5,), 0, [0, 1, 2, 2], False),
    ((5,), 0, [2, 0, 3, 0], True),
    ((4, 3), 0, [1, 0, 3], False),
    ((10, 3, 2), 0, [1, 2, 0, 6, 0], True),  # lengths sum to less than the axis
    ((5, 5), 1, [[2, 0, 3, 0], [0, 1, 2, 2], [3, 0, 2, 0], [1, 1, 1, 2], [0, 1, 2, 2]], False),
    ((3, 5, 4), 1, [[2, 0, 3], [0, 1, 4], [5, 0, 0]], False),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod", "amax"])
@pytest.mark.parametrize("mode", ["lengths", "offsets"])
def test_segment_reduce(dtype, reduce, mode):
    torch.manual_seed(1)
    for shape, axis, lengths, unsafe in SEG_CASES:
        lengths = torch.tensor(lengths)
        x = torch.randn(shape).to(dtype)
        for initial in (None, 2.0):
            kw = dict(axis=axis, unsafe=unsafe, initial=initial)
            if mode == "lengths":
                def fn(a, kw=kw):
                    return torch.segment_reduce(a, reduce, lengths=lengths.to(a.device), **kw)
            else:
                offs = to_offsets(lengths, axis)

                def fn(a, kw=kw):
                    return torch.segment_reduce(a, reduce, offsets=offs.to(a.device), **kw)
            both_nan(fn, x, dtype)


@pytest.mark.parametrize("reduce", ["max", "min", "prod"])
def test_segment_reduce_ties_zeros_nan(reduce):
    # ties share the gradient (ATen divides only the positive shares), zeros
    # and NaN take prod's explicit path, NaN wins max/min
    x = torch.tensor([[1.0, 2.0], [1.0, 0.0], [3.0, 0.0], [1.0, float("nan")], [2.0, 2.0], [0.0, 2.0]])
    lengths = torch.tensor([3, 3], dtype=torch.int32)
    for seed in range(3):
        both_nan(lambda a: torch.segment_reduce(a, reduce, lengths=lengths.to(a.device)), x, torch.float32,
                 grad_seed=seed)
        both_nan(lambda a: torch.segment_reduce(a, reduce, lengths=lengths.to(a.device), initial=0.5), x,
                 torch.float32, grad_seed=seed)


def test_segment_reduce_offsets_not_from_zero():
    x = torch.randn(8, 3)
    offs = torch.tensor([2, 4, 4, 7])
    both_nan(lambda a: torch.segment_reduce(a, "sum", offsets=offs.to(a.device)), x, torch.float32)
    both_nan(lambda a: torch.segment_reduce(a, "mean", offsets=offs.to(a.device), initial=-1.0), x, torch.float32)


def test_segment_reduce_errors():
    x = torch.randn(5, 3, device=DEV)
    with pytest.raises(RuntimeError, match="lengths contains negative value"):
        torch.segment_reduce(x, "sum", lengths=torch.tensor([6, -1], device=DEV))
    with pytest.raises(RuntimeError, match="to sum to data.size"):
        torch.segment_reduce(x, "sum", lengths=torch.tensor([1, 1], device=DEV))
    with pytest.raises(RuntimeError, match="reduce argument must be either sum, prod, mean, amax or amin"):
        torch.segment_reduce(x, "foo", lengths=torch.tensor([2, 3], device=DEV))
    with pytest.raises(RuntimeError, match="Expected axis to be the last dimension of lengths"):
        torch.segment_reduce(x, "sum", lengths=torch.tensor([2, 3], device=DEV), axis=1)
    with pytest.raises(RuntimeError, match="Either lengths or offsets must be defined"):
        torch.segment_reduce(x, "sum")
    with pytest.raises(RuntimeError, match="does not match data"):  # the CPU crashes here
        torch.segment_reduce(torch.randn(2, 5, device=DEV), "sum", lengths=torch.tensor([[1, 1, 3]], device=DEV),
                             axis=1)
    with pytest.raises(NotImplementedError):
        torch.segment_reduce(x.long(), "sum", lengths=torch.tensor([2, 3], device=DEV))
    # the kernel checks what unsafe skips
    with pytest.raises(RuntimeError, match="sum past data.size"):
        torch.segment_reduce(x, "sum", lengths=torch.tensor([4, 4], device=DEV), unsafe=True)
        torch.neuron.synchronize()
    with pytest.raises(RuntimeError, match="offsets must be non-decreasing"):
        torch.segment_reduce(x, "sum", offsets=torch.tensor([0, 3, 2], device=DEV))
        torch.neuron.synchronize()
    with pytest.raises(RuntimeError, match="out of range"):
        torch.segment_reduce(x, "sum", offsets=torch.tensor([0, 3, 7], device=DEV))
        torch.neuron.synchronize()


# ---- ctc_loss ------------------------------------------------------------------------------------

def ctc_both(log_probs, targets, il, tl, dtype=torch.float32, **kw):
    """F.ctc_loss on the CPU and the device; loss and gradient, NaN equal NaN."""
    rtol, atol = TOL_ACCUMULATED[dtype]
    lc = log_probs.clone().to(dtype).requires_grad_(True)
    ld = log_probs.detach().to(dtype).to(DEV).requires_grad_(True)

    def dev(v):
        return v.to(DEV) if isinstance(v, torch.Tensor) else v
    oc = F.ctc_loss(lc, targets, il, tl, **kw)
    od = F.ctc_loss(ld, dev(targets), dev(il), dev(tl), **kw)
    torch.testing.assert_close(od.cpu(), oc, rtol=rtol, atol=atol, equal_nan=True)
    g = torch.rand(oc.shape).to(dtype) + 0.5
    oc.backward(g)
    od.backward(g.to(DEV))
    torch.testing.assert_close(ld.grad.cpu(), lc.grad, rtol=rtol, atol=atol, equal_nan=True)
    assert_no_fallbacks()


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("as_tensor", [False, True])
def test_ctc_loss(reduction, zero_infinity, as_tensor):
    torch.manual_seed(2)
    T, B, C, S = 30, 6, 7, 10
    lp = torch.randn(T, B, C).log_softmax(2)
    targets = torch.randint(1, C, (B, S))
    targets[1, :4] = 3  # repeated labels need blanks between them
    il = [30, 25, 30, 7, 0, 12]  # sequence 4 has no frames
    tl = [10, 8, 0, 6, 0, 5]     # sequence 2 an empty target
    targets[3, :6] = torch.tensor([2, 2, 2, 2, 5, 5])  # needs 10 frames, has 7: infinite loss
    kw = dict(reduction=reduction, zero_infinity=zero_infinity)
    if as_tensor:
        ctc_both(lp, targets, torch.tensor(il), torch.tensor(tl), **kw)
    else:
        ctc_both(lp, targets, il, tl, **kw)
    # concatenated int32 targets
    cat = torch.cat([targets[b, :tl[b]] for b in range(B)]).int()
    ctc_both(lp, cat, il, tl, **kw)


def test_ctc_loss_blank_and_unbatched():
    torch.manual_seed(3)
    lp = torch.randn(12, 2, 5).log_softmax(2)
    targets = torch.tensor([[0, 1, 1, 3], [2, 0, 2, 2]])
    ctc_both(lp, targets, [12, 9], [4, 3], blank=4, reduction="none")
    ctc_both(lp[:, 0], targets[0], [12], [4], blank=4, reduction="sum")  # unbatched
    ctc_both(lp, targets, torch.tensor([12, 9], dtype=torch.int32), torch.tensor([4, 3]), reduction="mean")


def test_ctc_loss_raw_ops():
    torch.manual_seed(4)
    lp = torch.randn(8, 3, 4).log_softmax(2)
    tg = torch.tensor([[1, 2, 2], [3, 1, 0], [2, 2, 2]])
    il, tl = [8, 5, 4], [3, 2, 3]
    for lengths in ((il, tl), (torch.tensor(il), torch.tensor(tl))):
        nll_c, alpha_c = torch.ops.aten._ctc_loss(lp, tg, *lengths)
        dl = [v.to(DEV) if isinstance(v, torch.Tensor) else v for v in lengths]
        nll_d, alpha_d = torch.ops.aten._ctc_loss(lp.to(DEV), tg.to(DEV), *dl)
        torch.testing.assert_close(nll_d.cpu(), nll_c)
        # log_alpha agrees where ATen defines it (frames within the input length)
        for b in range(3):
            n = 2 * tl[b] + 1
            torch.testing.assert_close(alpha_d[b, :il[b], :n].cpu(), alpha_c[b, :il[b], :n])
        g = torch.rand(3)
        gc = torch.ops.aten._ctc_loss_backward(g, lp, tg, *lengths, nll_c, alpha_c, 0, False)
        gd = torch.ops.aten._ctc_loss_backward(g.to(DEV), lp.to(DEV), tg.to(DEV), *dl, nll_d, alpha_d, 0, False)
        torch.testing.assert_close(gd.cpu(), gc, equal_nan=True)
    assert_no_fallbacks()


def test_ctc_loss_errors():
    lp = torch.randn(6, 2, 4, device=DEV).log_softmax(2)
    t = torch.tensor([[1, 2, 2], [3, 1, 0]], device=DEV)
    with pytest.raises(RuntimeError, match="blank must be in label range"):
        F.ctc_loss(lp, t, [6, 5], [3, 2], blank=4)
    with pytest.raises(RuntimeError, match="Expected input_lengths to have value at most 6, but got value 7"):
        F.ctc_loss(lp, t, [7, 5], [3, 2])
    with pytest.raises(RuntimeError, match="Expected target_lengths to have value at least 0"):
        F.ctc_loss(lp, t, [6, 5], [-3, 2])
    with pytest.raises(RuntimeError, match="Expected tensor to have size at least 4 at dimension 1"):
        F.ctc_loss(lp, t, [6, 5], [4, 2])
    with pytest.raises(RuntimeError, match="input_lengths must be of size batch_size"):
        torch.ops.aten._ctc_loss(lp, t, [6], [3, 2])
    with pytest.raises(RuntimeError, match="input_lengths must be integral"):
        F.ctc_loss(lp, t, torch.tensor([6.0, 5.0]), torch.tensor([3, 2]))
    with pytest.raises(RuntimeError, match="target 9 of sequence 0 is out of range"):  # the CPU reads past C
        F.ctc_loss(lp, torch.tensor([[1, 9, 2], [3, 1, 0]], device=DEV), [6, 5], [3, 2])
        torch.neuron.synchronize()


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, float("inf")])
def test_cdist_pdist_nan(p):
    """NaN coordinates, as the CPU: p = 0 counts min(ceil|d|, 1), NaN for a NaN
    difference; cdist's p = inf folds with std::max and skips NaN (its float64
    run too), pdist's propagates it; the backward adds ATen's term for every
    pair, so NaN reaches the gradient."""
    x1 = torch.tensor([[float("nan"), 1.0, 5.0], [0.0, 0.0, 0.0], [0.5, -1.0, 2.0]])
    x2 = torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    got = []
    for dev in ("cpu", DEV):
        a = x1.clone().to(dev).requires_grad_()
        b = x2.clone().to(dev).requires_grad_()
        d = torch.cdist(a, b, p=p)
        d.backward(torch.ones_like(d))
        pd = torch.pdist(torch.cat([x1, x2]).to(dev), p=p)
        got.append([t.detach().cpu() for t in (d, a.grad, b.grad, pd)])
    for dev_t, cpu_t in zip(got[1], got[0]):
        assert torch.equal(dev_t.isnan(), cpu_t.isnan()), (p, dev_t, cpu_t)
        fin = cpu_t.isfinite()
        torch.testing.assert_close(dev_t[fin], cpu_t[fin], rtol=1e-5, atol=1e-5)
    assert_no_fallbacks()


def test_margin_losses_skip_nan_terms_like_the_cpu():
    """The CPU adds a hinge term only `if (z > 0)`, so a NaN term is skipped
    (multi_margin_loss([[nan, 0.5]], [0]) is 0); inf terms still count."""
    nan, inf = float("nan"), float("inf")
    cases = [([[0.5, nan]], [0]), ([[nan, 0.5]], [0]), ([[0.5, inf]], [0]), ([[1.0, nan, 2.0]], [2]),
             ([[nan, 1.0, 2.0], [0.1, 0.2, 0.3]], [0, 1])]
    for x, y in cases:
        for p in (1, 2):
            for red in ("none", "mean", "sum"):
                got = []
                for dev in ("cpu", DEV):
                    xx = torch.tensor(x, device=dev, requires_grad=True)
                    loss = F.multi_margin_loss(xx, torch.tensor(y, device=dev), p=p, reduction=red)
                    loss.sum().backward()
                    got.append((loss.detach().cpu(), xx.grad.cpu()))
                for d, c in zip(got[1], got[0]):
                    torch.testing.assert_close(d, c, equal_nan=True)
    x = torch.tensor([[0.5, nan, 0.2, 1.0]])
    y = torch.tensor([[3, 0, -1, 1]])
    torch.testing.assert_close(F.multilabel_margin_loss(x.to(DEV), y.to(DEV)).cpu(), F.multilabel_margin_loss(x, y))
    assert_no_fallbacks()


def _edge_values(shape, dtype, seed):
    """Normal values with ~40% replaced by magnitudes near the float limits,
    zeros, infinities and NaN, drawn from a fixed seed."""
    g = torch.Generator().manual_seed(seed)
    edge = torch.tensor([3.4e38, -3.4e38, 1e18, -1e18, 1.0, -1.0, 0.5, 1e-30, 0.0, float("nan"), float("inf"),
                         -float("inf")], dtype=torch.float64)
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    pick = torch.rand(shape, generator=g) < 0.4
    return torch.where(pick, edge[torch.randint(len(edge), shape, generator=g)], x).to(dtype)


def _bitwise(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got.nan_to_num(0.0), want.nan_to_num(0.0)), (got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("red", ["none", "mean", "sum"])
def test_multi_margin_loss_follows_the_cpu_order_at_the_float_limits(dtype, red):
    """The CPU's z is (margin - x[y]) + x[d], each row summed serially in the
    dtype and divided by C there, rows of a sum/mean added in double: with
    values near +-3.4e38 (or 1e18 in float64) another association overflows
    or cancels (all -1e18: the CPU's terms are 0, margin - x[y] + x[d]
    computed as (x[d] - x[y]) + margin gives 1). Exact, values and
    gradients, over p, weight, margin and a transposed layout."""
    for i, (n, c) in enumerate([(3, 10), (7, 4), (1, 9), (16, 13), (5, 2)]):
        for p in (1, 2):
            x = _edge_values((n, c), dtype, seed=100 * i + p)
            if i % 2:
                x = x.t().contiguous().t()
            t = torch.randint(c, (n,), generator=torch.Generator().manual_seed(i))
            w = _edge_values((c,), dtype, seed=7 + i).abs() if i % 2 == 0 else None
            margin = [1.0, 0.7, 3e38, -2.0, 1.0][i]
            go = _edge_values((n,) if red == "none" else (), dtype, seed=50 + i)
            res = []
            for dev in ("cpu", DEV):
                xx = x.detach().to(dev, copy=True).requires_grad_()
                loss = F.multi_margin_loss(xx, t.to(dev), p=p, margin=margin,
                                           weight=None if w is None else w.to(dev), reduction=red)
                loss.backward(go.to(dev))
                res.append((loss.detach().cpu(), xx.grad.cpu()))
            _bitwise(res[1][0], res[0][0])
            _bitwise(res[1][1], res[0][1])
    # the all -1e18 row of fuzz case 16180339-393716: 0 on the CPU
    x = torch.full((3, 10), -1e18, dtype=dtype)
    t = torch.tensor([4, 7, 5])
    _bitwise(F.multi_margin_loss(x.to(DEV), t.to(DEV), reduction=red).cpu(), F.multi_margin_loss(x, t, reduction=red))
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("red", ["mean", "sum"])
def test_spatial_nll_loss_follows_the_cpu_cascade(dtype, red):
    """The CPU sums a spatial nll_loss in its cascade over the linear index
    (levels of 16, every step rounded to the dtype): -1e8 then fifteen -1
    sum to 100000016 there, not the 1e8 of a serial sum. Exact against the
    CPU over edge values, weights, ignore_index, channels-last and 3-d
    inputs, and sizes past 256 elements (three cascade levels)."""
    x = torch.full((1, 1, 16), -1.0, dtype=dtype)
    x[0, 0, 0] = -1e8 if dtype in (torch.float32, torch.float64) else -256.0
    t = torch.zeros(1, 16, dtype=torch.long)
    _bitwise(F.nll_loss(x.to(DEV), t.to(DEV), reduction=red).cpu(), F.nll_loss(x, t, reduction=red))
    for i, (n, c, h, w) in enumerate([(2, 3, 5, 7), (3, 4, 30, 11), (1, 2, 1, 300), (4, 1, 9, 9)]):
        x = _edge_values((n, c, h, w), dtype, seed=i)
        if i == 1:
            x = x.contiguous(memory_format=torch.channels_last)
        g = torch.Generator().manual_seed(10 + i)
        t = torch.randint(c, (n, h, w), generator=g)
        t[torch.rand(n, h, w, generator=g) < 0.2] = -100
        wt = (torch.rand(c, generator=g) + 0.5).to(dtype) if i % 2 else None
        xs, ts = (x, t) if i % 2 else (x.reshape(n, c, h * w), t.reshape(n, h * w))
        want = F.nll_loss(xs, ts, weight=wt, reduction=red)
        got = F.nll_loss(xs.to(DEV), ts.to(DEV), weight=None if wt is None else wt.to(DEV), reduction=red)
        _bitwise(got.cpu(), want)
    assert_no_fallbacks()


def test_spatial_nll_loss_errors_follow_the_cpu():
    """The CPU's checks in its order: the target dtype (Long or Byte), the
    weight size, then in its kernel the input dtype, the weight's dtype and
    a Byte target read as int64 (after an empty sum's early return)."""
    x, t = torch.randn(2, 3, 4, 5), torch.randint(3, (2, 4, 5))
    for red in ("none", "mean"):
        raises_like_cpu(lambda d: F.nll_loss(x.to(d), t.int().to(d), reduction=red), RuntimeError)
        raises_like_cpu(lambda d: F.nll_loss(x.long().to(d), t.to(d), reduction=red), NotImplementedError)
        raises_like_cpu(lambda d: F.nll_loss(x.to(d), t.to(d), weight=torch.ones(3, dtype=torch.float64, device=d),
                                             reduction=red), RuntimeError)
        raises_like_cpu(lambda d: F.nll_loss(x.to(d), t.byte().to(d), reduction=red), RuntimeError)
        raises_like_cpu(lambda d: F.nll_loss(x.to(d), t.to(d), weight=torch.ones(4, device=d), reduction=red),
                        RuntimeError)
    empty = F.nll_loss(x[:0].to(DEV), t[:0].byte().to(DEV), reduction="sum")
    assert empty.cpu().item() == F.nll_loss(x[:0], t[:0].byte(), reduction="sum").item() == 0
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("red", ["none", "mean", "sum"])
def test_nll_loss_rows_follow_the_cpu_order(dtype, red):
    """A 1-d/2-d nll_loss: the CPU's nll_loss_out_frame sums the rows in its
    own cascade (levels of 16, each step in the dtype; a 1-d input is summed
    even without a reduction), -x[t] w[t] per row, and the gradient
    w[t] * -(g / total_weight). Exact against the CPU, values and
    gradients, over edge values, weights, ignore_index, a transposed input,
    Byte targets and sizes past 256 rows (three cascade levels)."""
    # fuzz case 14142135-849927 (float32 [13, 2] with 3.4e38 and -inf): the
    # per-row losses summed by another order gave 0.044 for the CPU's -0.131
    if dtype == torch.float32:
        x = torch.tensor([[-0.2543983459472656, -1.0], [1.101962685585022, 3.4028234663852886e+38],
                          [-0.0, 0.07161089777946472], [-0.4076780080795288, -1.169400691986084],
                          [-0.0, -0.4395832121372223], [-0.34816810488700867, 1.1920928955078125e-07],
                          [-3.4028234663852886e+38, -float("inf")], [-0.0, -0.5772024393081665],
                          [1.501037836074829, -0.027062885463237762], [-0.0, -3.4028234663852886e+38],
                          [0.5259138941764832, -0.39300695061683655], [1.3421730995178223, -0.5280374884605408],
                          [-0.09044742584228516, float("nan")]])
        t = torch.tensor([1, 1, 1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0])
        _bitwise(F.nll_loss(x.to(DEV), t.to(DEV), reduction=red).cpu(), F.nll_loss(x, t, reduction=red))
    for i, (n, c) in enumerate([(17, 3), (300, 5), (1, 4), (40, 2), (0, 3), (4, 1)]):
        for one_d in ([False, True] if n == 1 else [False]):
            x = _edge_values((n, c), dtype, seed=20 + i)
            g = torch.Generator().manual_seed(30 + i)
            t = torch.randint(c, (n,), generator=g)
            t[torch.rand(n, generator=g) < 0.2] = -100
            wt = (torch.rand(c, generator=g) * 3).to(dtype) if i % 2 else None
            if i == 3:
                x = x.t().contiguous().t()
            if i == 5:
                t = t.clamp(min=0).byte()
            if one_d:
                x, t = x[0], t[0]
            res = []
            for dev in ("cpu", DEV):
                xx = x.to(dev, copy=True).requires_grad_()
                loss = F.nll_loss(xx, t.to(dev), weight=None if wt is None else wt.to(dev), reduction=red)
                go = torch.randn(loss.shape, generator=torch.Generator().manual_seed(40 + i)).to(dtype)
                loss.backward(go.to(dev))
                res.append((loss.detach().cpu(), xx.grad.cpu()))
            for k in range(2):
                _bitwise(res[1][k], res[0][k])
                ok = ~res[0][k].isnan()
                assert torch.equal(res[1][k][ok].signbit(), res[0][k][ok].signbit())
    assert_no_fallbacks()


def test_nll_loss_rows_errors_follow_the_cpu():
    """The forward's and the backward's checks, in the CPU's order and
    classes: shapes, total_weight and grad_output sizes, the weight's
    dtype, and an out-of-range target (IndexError, raised at the op)."""
    x, t, tw = torch.randn(3, 4), torch.tensor([0, 1, 2]), torch.tensor(3.0)
    bwd = torch.ops.aten.nll_loss_backward
    raises_like_cpu(lambda d: F.nll_loss(x.to(d), t.to(d), weight=torch.ones(4, dtype=torch.float64, device=d)),
                    RuntimeError)
    raises_like_cpu(lambda d: F.nll_loss(x.to(d), torch.tensor([0, 4, 9], device=d)).cpu(), IndexError)
    raises_like_cpu(lambda d: F.nll_loss(x[0].to(d), torch.tensor(-1, device=d), reduction="none").cpu(), IndexError)
    for go, red, tot in [(torch.randn(3), 1, tw), (torch.randn(()), 0, tw), (torch.randn(4), 0, tw),
                         (torch.randn(()), 1, torch.ones(2))]:
        raises_like_cpu(lambda d: bwd(go.to(d), x.to(d), t.to(d), None, red, -100, tot.to(d)),
                        IndexError if go.dim() == 0 and red == 0 else RuntimeError)
    raises_like_cpu(lambda d: bwd(torch.randn((), device=d), x.to(d), t.to(d), torch.ones(3, device=d), 1, -100,
                                  tw.to(d)), RuntimeError)
    raises_like_cpu(lambda d: bwd(torch.randn((), device=d), x.to(d), torch.tensor([0, 7, 1], device=d), None, 2,
                                  -100, tw.to(d)).cpu(), IndexError)
    assert_no_fallbacks()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, float("inf")])
def test_cdist_follows_the_cpu_order_at_the_float_limits(dtype, p):
    """The CPU's cdist runs a scalar loop in the input dtype: a float32
    square of 1e20 overflows to inf there (neuron used to sum in double and
    return 1e20), one of 1e-30 underflows to 0, and with p = 2 the squares
    of the last m % 4 (float32) or m % 2 (float64) coordinates are fused
    into a multiply-add by the compiled loop. The gradients use that
    distance: grad * diff / inf is 0 (fuzz case 16180339-1501583). Exact,
    forward and both gradients, broadcast batch and a transposed x1."""
    a = torch.tensor([[1e20, 0.0], [1e-30, 0.0], [3.4e38, -1.0]], dtype=dtype)
    b = torch.zeros(2, 2, dtype=dtype)
    _bitwise(torch.cdist(a.to(DEV), b.to(DEV), p=p).cpu(), torch.cdist(a, b, p=p))
    for i, (bt, P, R, M) in enumerate([(2, 3, 5, 5), (1, 7, 4, 13), (3, 1, 6, 2), (2, 6, 6, 11)]):
        x1 = _edge_values((bt, P, M), dtype, seed=200 + i) if i % 2 else torch.randn(
            bt, P, M, generator=torch.Generator().manual_seed(i), dtype=dtype)
        if i == 1:
            x1 = x1.transpose(1, 2).contiguous().transpose(1, 2)
        x2 = _edge_values((R, M) if i == 2 else (bt, R, M), dtype, seed=300 + i)
        go = (torch.randint(-2, 3, (bt, P, R), generator=torch.Generator().manual_seed(9 + i)) * 0.5).to(dtype)
        res = []
        for dev in ("cpu", DEV):
            u, v = x1.detach().to(dev, copy=True).requires_grad_(), x2.detach().to(dev, copy=True).requires_grad_()
            d = torch.cdist(u, v, p=p)
            d.backward(go.to(dev))
            res.append((d.detach().cpu(), u.grad.cpu(), v.grad.cpu()))
        for got, want in zip(res[1], res[0]):
            _bitwise(got, want)
    assert_no_fallbacks()


def test_multi_margin_loss_shape_follows_the_target():
    """reduction='none' gives one loss per row exactly when the target is
    1-d: a [4] input with target [1] gives [1], a [1, 4] input with a 0-d
    target gives a 0-d loss (and a 0-d gradient input)."""
    for x, t in ((torch.randn(4), torch.tensor([1])), (torch.randn(1, 4), torch.tensor(1))):
        both(lambda a: F.multi_margin_loss(a, t.to(a.device), reduction="none"), x)
        assert F.multi_margin_loss(x.to(DEV), t.to(DEV), reduction="none").shape == \
            F.multi_margin_loss(x, t, reduction="none").shape


# multi_margin_loss of an integer input: the CPU's kernel dispatch raises
# NotImplementedError before it reads the targets (an out-of-range one is
# not what is reported).
def test_multi_margin_loss_refuses_integers_before_reading_targets():
    x, t = torch.ones(3, 4, dtype=torch.int32), torch.tensor([0, 9, 1])
    raises_like_cpu(lambda d: F.multi_margin_loss(x.to(d), t.to(d)), NotImplementedError)
    assert_no_fallbacks()


# ... but returns before its dispatch for an empty one: a result in the
# input's dtype (its value uninitialised on the CPU for 'mean' and 'sum';
# neuron's is 0, the sum of nothing), whatever the weight's dtype.
@pytest.mark.parametrize("dt", [torch.int64, torch.int8, torch.uint8, torch.bool])
@pytest.mark.parametrize("red", ["mean", "sum", "none"])
def test_margin_losses_of_an_empty_integer_input_compute_like_the_cpu(dt, red):
    x, t = torch.empty(0, 3, dtype=dt), torch.empty(0, dtype=torch.int64)
    for w in (None, torch.ones(3), torch.ones(3, dtype=torch.int32)):
        want = F.multi_margin_loss(x, t, weight=w, reduction=red)
        got = F.multi_margin_loss(x.to(DEV), t.to(DEV), weight=None if w is None else w.to(DEV), reduction=red)
        assert (got.dtype, got.shape) == (want.dtype, want.shape)
        if red != "none":
            assert got.cpu().item() == 0
    want = F.multilabel_margin_loss(x, torch.empty(0, 3, dtype=torch.int64), reduction=red)
    got = F.multilabel_margin_loss(x.to(DEV), torch.empty(0, 3, dtype=torch.int64, device=DEV), reduction=red)
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    assert_no_fallbacks()


# index_reduce 'prod' of float16/bfloat16 over a >1-d result: the CPU
# multiplies slice by slice with one iterator, and when each source slice is
# one element broadcast its 16-bit mul kernel drops that operand from the
# shared iterator, so the second index fails an internal assert
# (RuntimeError), after the first two indices are checked (IndexError).
@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("case", [
    ("source [1, n]", (1, 6), (1, 4), 1, [1, 0, 1, 0], "prod", True),
    ("expanded source", (17, 6), None, 1, [1, 0, 1, 0], "prod", True),
    ("dim 0", (6, 1), (2, 1), 0, [0, 1], "prod", False),
    ("second index out of range", (1, 6), (1, 3), 1, [0, 9, 1], "prod", True),
    ("third index out of range", (1, 6), (1, 3), 1, [0, 1, 9], "prod", True),
    ("third index out of range, without self", (1, 6), (1, 3), 1, [0, 1, 9], "prod", False),
    ("one index computes", (1, 6), (1, 1), 1, [2], "prod", True),
    ("dense source computes", (3, 6), (3, 2), 1, [2, 2], "prod", True),
    ("mean computes", (1, 6), (1, 4), 1, [1, 0, 1, 0], "mean", True),
], ids=lambda c: c[0] if isinstance(c, tuple) else str(c))
def test_index_reduce_16bit_prod_of_one_element_slices_like_the_cpu(dt, case):
    _, shape, src_shape, dim, index, reduce, include_self = case
    def call(d):
        s = torch.arange(1, 7, dtype=dt, device=d).reshape(1, 6) if shape == (17, 6) else torch.ones(shape, dtype=dt,
                                                                                                     device=d)
        if shape == (17, 6):
            s, src = s.expand(17, 6), torch.full((1, 4), 2.0, dtype=dt, device=d).expand(17, 4)
        else:
            src = torch.full(src_shape, 2.0, dtype=dt, device=d)
        return s.index_reduce(dim, torch.tensor(index, device=d), src, reduce, include_self=include_self)
    try:
        want = call("cpu")
    except Exception:  # noqa: BLE001 - the class is what is compared
        raises_like_cpu(call)
    else:
        assert torch.equal(call(DEV).cpu(), want)
    assert_no_fallbacks()


# addbmm with k = 0 over several batches: the CPU's per-batch addmm_ scales a
# bool result by beta = 1 (an integer) from the second batch on, and refuses
# (bool times int64); one batch, or an integer result, computes.
@pytest.mark.parametrize("dtype,batches", [(torch.bool, 2), (torch.bool, 1), (torch.int32, 3)], ids=str)
def test_addbmm_of_empty_products_refuses_a_bool_result_like_the_cpu(dtype, batches):
    def call(dev):
        m = torch.ones(3, 2, dtype=dtype, device=dev)
        b1, b2 = torch.ones(batches, 3, 0, dtype=dtype, device=dev), torch.ones(batches, 0, 2, dtype=dtype, device=dev)
        return torch.addbmm(m, b1, b2, beta=0, alpha=0)
    if dtype == torch.bool and batches > 1:
        raises_like_cpu(call, RuntimeError)
    else:
        got, want = call(DEV).cpu(), call("cpu")
        assert got.dtype == want.dtype and torch.equal(got, want)
    assert_no_fallbacks()
