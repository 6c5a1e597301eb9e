package cri

import "context"

// SetLabels sets labels of the containerd image record ref as someone
// other than bootroll would (a person with ctr, a provisioning script).
func (c *Containerd) SetLabels(ctx context.Context, ref string, labels map[string]string) error {
	img, err := c.get(ctx, ref)
	if err != nil {
		return err
	}
	return c.setLabels(ctx, img, labels)
}
