package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// writeStatus writes the status that desired computes for obj (a *Market, *Event or *ShardPool;
// status points into one at its status), with an optimistic lock, and skips the write when nothing
// changed or when desired says to (false). On a conflict it takes only the stored object's
// resourceVersion and status and writes what desired computes again: the reconciler's
// observation, still stamped with the generation of the spec it acted on (a status never claims a
// spec it did not act on; a newer generation has a reconcile of its own coming). obj's spec and
// generation are left as read, and its resourceVersion and status become what was written.
func writeStatus[T interface {
	client.Object
	*O
}, O any, S any](ctx context.Context, c client.Client, obj T, status func(T) *S, desired func() (S, bool)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		want, ok := desired()
		if !ok || equality.Semantic.DeepEqual(*status(obj), want) {
			return nil
		}
		// Patch a copy: the answer is the whole stored object, whose spec may be newer than obj's
		// (after a conflict, the lock is the stored resourceVersion).
		written := obj.DeepCopyObject().(T)
		patch := client.MergeFromWithOptions(obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
		*status(written) = want
		err := c.Status().Patch(ctx, written, patch)
		switch {
		case err == nil:
			obj.SetResourceVersion(written.GetResourceVersion())
			*status(obj) = *status(written)
		case apierrors.IsConflict(err):
			stored := T(new(O))
			if gerr := c.Get(ctx, client.ObjectKeyFromObject(obj), stored); gerr != nil {
				return gerr
			}
			obj.SetResourceVersion(stored.GetResourceVersion())
			*status(obj) = *status(stored)
		}
		return err
	})
}
