package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/meshnode/meshnode/spot"
)

// CartType is the stable type of the shopping cart Instance Spot.
const CartType = "inventory.cart"

// cart is an Instance Spot: one per customer ("cart:alice"), never created
// by a call. The first message sent to a cart id creates the cart on a
// node offering the type (cold activation), and that message is the first
// thing the new cart runs.
//
//	send or request "add <sku> <n>"  → n more of sku in the cart
//	request "show"                   → "sku:apple=2 sku:pear=1" (sorted), or "empty"
type cart struct {
	items map[string]int
}

// Receive implements spot.Handler.
func (c *cart) Receive(t *spot.Turn, env spot.Envelope) error {
	args := strings.Fields(string(env.Body))
	switch {
	case len(args) == 3 && args[0] == "add":
		n, err := strconv.Atoi(args[2])
		if err != nil || n <= 0 {
			return fmt.Errorf("cart %s: bad quantity %q", t.ID(), args[2])
		}
		c.items[args[1]] += n
		if env.Kind == spot.Request {
			return t.Reply([]byte(c.show()))
		}
		return nil
	case len(args) == 1 && args[0] == "show" && env.Kind == spot.Request:
		return t.Reply([]byte(c.show()))
	}
	return fmt.Errorf("cart %s: unknown command %q", t.ID(), env.Body)
}

func (c *cart) show() string {
	if len(c.items) == 0 {
		return "empty"
	}
	skus := make([]string, 0, len(c.items))
	for sku := range c.items {
		skus = append(skus, sku)
	}
	slices.Sort(skus)
	parts := make([]string, len(skus))
	for i, sku := range skus {
		parts[i] = fmt.Sprintf("%s=%d", sku, c.items[sku])
	}
	return strings.Join(parts, " ")
}

// cartFactory describes the cart type. An Instance Spot's factory gets no
// creation body (nobody called Create); the id is in req.ID.
func cartFactory() spot.Factory {
	return spot.Factory{
		StableType: CartType,
		Kind:       spot.KindInstanceSpot,
		// Host relocation and drain move Actors and User Spots only; an
		// Instance Spot stays on its node and ends with it. A cart is
		// cheap to lose in this example, so it says so explicitly.
		Policy: spot.PolicyDisabled,
		New: func(context.Context, spot.CreateRequest) (spot.Handler, error) {
			return &cart{items: map[string]int{}}, nil
		},
	}
}
