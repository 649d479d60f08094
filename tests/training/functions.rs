//! Users' own operations (`autograd::Function`, PyTorch's
//! `torch.autograd.Function`): several inputs and outputs, saved tensors,
//! outputs that get no gradient (zeros, as PyTorch's `materialize_grads`),
//! `mark_non_differentiable`, gradients of gradients when the backward
//! says it can, and the errors of a backward that breaks the rules.

use crate::common::gradcheck::{T, data, gradcheck, gradgradcheck};
use devtensor::autograd::{Context, Function, GradOptions, apply, grad, try_apply};
use devtensor::{Device, Result, no_grad};

/// `(a·b, a + b)`, saving both inputs; its backward is written with
/// recorded ops on saved inputs, so it can be differentiated again.
struct ProductAndSum;

impl<D: Device> Function<D, f64> for ProductAndSum {
    fn name(&self) -> &'static str {
        "ProductAndSum"
    }

    fn forward(&self, ctx: &mut Context<D, f64>, inputs: &[&T<D>]) -> Result<Vec<T<D>>> {
        ctx.save_for_backward(&[inputs[0], inputs[1]]);
        Ok(vec![inputs[0].try_mul(inputs[1])?, inputs[0].try_add(inputs[1])?])
    }

    fn backward(&self, ctx: &Context<D, f64>, grads: &[T<D>]) -> Result<Vec<Option<T<D>>>> {
        let [a, b] = [&ctx.saved_tensors()[0], &ctx.saved_tensors()[1]];
        Ok(vec![Some(grads[0].try_mul(b)?.try_add(&grads[1])?), Some(grads[0].try_mul(a)?.try_add(&grads[1])?)])
    }

    fn twice_differentiable(&self) -> bool {
        true
    }
}

/// A straight-through estimator: `round` forward, the identity backward
/// (quantisation-aware training), and a non-differentiable second output,
/// the rounding's error.
struct RoundStraightThrough;

impl<D: Device> Function<D, f64> for RoundStraightThrough {
    fn name(&self) -> &'static str {
        "RoundStraightThrough"
    }

    fn forward(&self, ctx: &mut Context<D, f64>, inputs: &[&T<D>]) -> Result<Vec<T<D>>> {
        let rounded = inputs[0].try_round()?;
        ctx.mark_non_differentiable(1);
        Ok(vec![rounded.clone(), inputs[0].try_sub(&rounded)?])
    }

    fn backward(&self, _: &Context<D, f64>, grads: &[T<D>]) -> Result<Vec<Option<T<D>>>> {
        assert_eq!(grads[1].to_vec(), vec![0.0; grads[1].elem_count()], "a non-differentiable output gets zeros");
        Ok(vec![Some(grads[0].clone())])
    }
}

/// A backward that returns what it should not.
struct Broken(usize);

impl<D: Device> Function<D, f64> for Broken {
    fn name(&self) -> &'static str {
        "Broken"
    }

    fn forward(&self, _: &mut Context<D, f64>, inputs: &[&T<D>]) -> Result<Vec<T<D>>> {
        Ok(vec![inputs[0].try_mul_scalar(2.0)?])
    }

    fn backward(&self, _: &Context<D, f64>, grads: &[T<D>]) -> Result<Vec<Option<T<D>>>> {
        match self.0 {
            0 => Ok(vec![]),
            _ => Ok(vec![Some(grads[0].try_sum()?)]),
        }
    }
}

fn functions_record_one_op_with_their_backward<D: Device>() {
    let a = T::<D>::from_vec(data(6, 1), [2, 3]);
    let b = T::<D>::from_vec(data(6, 2), [2, 3]);
    let both = |t: &[T<D>]| {
        let out = apply(ProductAndSum, &[&t[0], &t[1]]);
        &out[0] * 2.0 + out[1].exp()
    };
    gradcheck("ProductAndSum", &[a.clone(), b.clone()], both);
    gradgradcheck("ProductAndSum", &[a.clone(), b.clone()], both);
    // Only the first output used: the second's gradient is zeros, so the
    // gradients are those of a·b alone.
    let (x, y) = (a.detach().requires_grad(), b.detach().requires_grad());
    let out = apply(ProductAndSum, &[&x, &y]);
    assert_eq!(out[0].grad_fn(), Some("ProductAndSum"));
    let grads = out[0].sum().backward();
    assert_eq!(grads.get(&x).unwrap().to_vec(), b.to_vec());
    assert_eq!(grads.get(&y).unwrap().to_vec(), a.to_vec());
    // Untracked inputs, or no_grad: nothing recorded.
    assert!(!apply(ProductAndSum, &[&a, &b])[0].tracks_grad());
    assert!(!no_grad(|| apply(ProductAndSum, &[&x, &y]))[0].tracks_grad());
    // One tracked input of two: only it gets a gradient.
    let grads = apply(ProductAndSum, &[&x, &b])[0].sum().backward();
    assert_eq!((grads.len(), grads.get(&x).unwrap().to_vec()), (1, b.to_vec()));
}

fn straight_through_and_non_differentiable_outputs_follow_pytorch<D: Device>() {
    let x = T::<D>::from_vec(vec![0.4, 1.6, -2.2], [3]).requires_grad();
    let out = apply(RoundStraightThrough, &[&x]);
    assert_eq!(out[0].to_vec(), [0.0, 2.0, -2.0]);
    assert!(!out[1].tracks_grad(), "marked not differentiable");
    let w = T::<D>::from_vec(vec![1.0, -3.0, 0.5], [3]);
    let grads = (&out[0] * &w).sum().backward();
    assert_eq!(grads.get(&x).unwrap().to_vec(), w.to_vec(), "the identity backward");
    // Its backward is not declared twice differentiable: a gradient through
    // it under create_graph cannot be differentiated again.
    let [dx] = grad(&[&(out[0].square()).sum()], [&x], GradOptions::new().create_graph(true));
    let err = dx.sum().try_backward().unwrap_err();
    assert!(err.to_string().contains("`RoundStraightThrough`"), "{err}");
}

fn a_backward_that_breaks_the_rules_is_an_error_naming_it<D: Device>() {
    let x = T::<D>::from_vec(vec![1.0, 2.0], [2]).requires_grad();
    let err = apply(Broken(0), &[&x])[0].sum().try_backward().unwrap_err();
    assert!(err.to_string().contains("Broken") && err.to_string().contains("0 gradients for 1 inputs"), "{err}");
    let err = apply(Broken(1), &[&x])[0].sum().try_backward().unwrap_err();
    assert!(err.to_string().contains("a gradient of shape [] for input 0"), "{err}");
    struct MarksTooMany;
    impl<D: Device> Function<D, f64> for MarksTooMany {
        fn name(&self) -> &'static str {
            "MarksTooMany"
        }
        fn forward(&self, ctx: &mut Context<D, f64>, inputs: &[&T<D>]) -> Result<Vec<T<D>>> {
            ctx.mark_non_differentiable(3);
            Ok(vec![inputs[0].clone()])
        }
        fn backward(&self, _: &Context<D, f64>, grads: &[T<D>]) -> Result<Vec<Option<T<D>>>> {
            Ok(vec![Some(grads[0].clone())])
        }
    }
    let err = try_apply(MarksTooMany, &[&x]).unwrap_err();
    assert!(err.to_string().contains("output 3 was marked not differentiable"), "{err}");
}

/// `examples/custom_function.rs`: the straight-through fit finds the
/// quantised weights, and the reversal layer flips the gradient.
fn the_custom_function_example_fits_and_reverses<D: Device>() {
    use crate::custom_function_example::{fit_quantized, reversed_gradient};
    assert_eq!(fit_quantized::<D>().unwrap(), [0.75, -1.5]);
    assert_eq!(reversed_gradient::<D>().unwrap(), [-1.5; 3]);
}

device_tests! {
    the_custom_function_example_fits_and_reverses => the_custom_function_example_fits_and_reverses,
    functions_record_one_op_with_their_backward => functions_record_one_op_with_their_backward,
    straight_through_and_non_differentiable_outputs_follow_pytorch =>
        straight_through_and_non_differentiable_outputs_follow_pytorch,
    a_backward_that_breaks_the_rules_is_an_error_naming_it => a_backward_that_breaks_the_rules_is_an_error_naming_it,
}
