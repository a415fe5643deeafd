/* Op family RNN. Fused recurrent cells (kernels/rnn/): the elementwise half
 * of one LSTM or GRU time step, forward and backward, as ATen's
 * _thnn_fused_lstm_cell / _thnn_fused_gru_cell and their backward ops
 * define it. The gate matmuls (x W_ih^T, h W_hh^T) are the caller's GEMMs;
 * these ops add the biases, apply the gate nonlinearities and combine the
 * gates in one pass, and save the workspace the matching backward reads.
 * Entries: X(name, kind, min_inputs, max_inputs); scalars (s0..s3),
 * params (p0..p3) and aux[] as each comment says. See nrt/launch.h for
 * how families are numbered.
 *
 * Common layout: sizes (ndim 2) = {B, H}, batch and hidden size. Every
 * operand is a matrix given by two byte strides {row, column}: a state
 * [B, H]; a gate matrix [B, G*H] whose gate g, unit j is column g*H + j;
 * or a bias vector [G*H], passed with row stride 0. Gate order is ATen's:
 * LSTM (G = 4) i, f, g, o (input, forget, cell, output); GRU (G = 3) r, z, n
 * (reset, update, new). Outputs must not overlap inputs. Everything is
 * computed in float32 (float64 data too, the device rule); outputs are
 * rounded once to their dtype. */
#ifndef NRT_OPS_RNN_H
#define NRT_OPS_RNN_H

#include "nrt/launch.h"

#define NRT_OPS_RNN(X)                                                        \
  /* LSTM: with a_k = (input_gates_k + input_bias_k)                          \
     + (hidden_gates_k + hidden_bias_k): i, f, o = sigmoid(a), g = tanh(a),   \
     cy = f * cx + i * g, hy = o * tanh(cy). */                               \
  X(LSTM_CELL, RNN, 3, 5)        /* outputs hy [B,H], cy [B,H], workspace   \
     [B,4H] = the activated gates i, f, g, o; inputs input_gates [B,4H],    \
     hidden_gates [B,4H], cx [B,H], then input_bias [4H] and hidden_bias   \
     [4H] both or neither (3 or 5 inputs) */                                \
  X(LSTM_CELL_BACKWARD, RNN, 3, 5) /* outputs grad_gates [B,4H] (the        \
     gradient of the pre-activation a, hence of both gate matrices and     \
     biases), grad_cx [B,H]; inputs grad_hy [B,H]?, grad_cy [B,H]?, cx,     \
     cy, workspace [B,4H]. p0 bit0 = grad_hy present, bit1 = grad_cy       \
     present (present ones come first, in that order; an absent one is     \
     zero; at least one present) */                                         \
  /* GRU: r = sigmoid((ir + bir) + (hr + bhr)), z likewise,                   \
     n = tanh((in + bin) + r * (hn + bhn)), hy = n + z * (hx - n). */         \
  X(GRU_CELL, RNN, 3, 5)         /* outputs hy [B,H], workspace [B,5H] = r, \
     z, n, hx, hn + bhn; inputs input_gates [B,3H], hidden_gates [B,3H], hx \
     [B,H], then input_bias [3H] and hidden_bias [3H] both or neither */     \
  X(GRU_CELL_BACKWARD, RNN, 2, 2) /* outputs grad_input_gates [B,3H],      \
     grad_hidden_gates [B,3H] (they differ only in the n gate: grad_hn =   \
     grad_in * r), grad_hx [B,H] (the direct path z * grad_hy only);       \
     inputs grad_hy [B,H], workspace [B,5H] */

NRT_OP_FAMILY_ENUM(RNN, NRT_OPS_RNN);

#endif
