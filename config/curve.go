package config

import (
	"errors"
	"fmt"
	"os"

	"github.com/meshnode/meshnode/router/transport/curve"
)

// Keys loads and checks the key pair and the allow-list (reading the key
// files). Call it only when Enabled.
func (c CurveConfig) Keys() (curve.KeyPair, []curve.Key, error) {
	kp, kerr := c.keyPair()
	allowed, aerr := c.allowedKeys()
	if err := errors.Join(kerr, aerr); err != nil {
		return kp, nil, err
	}
	return kp, allowed, nil
}

// unusedKeys refuses CURVE settings given while CURVE is off: they were
// meant to secure the links, which would silently stay plain text (a node
// started with its key files but without enabled ran unencrypted, with no
// word in the log — an operator try-out, 2026-12-06). The Redis TLS keys
// follow the same rule (redistls.go).
func (c CurveConfig) unusedKeys(ps *problems) {
	set := []struct {
		name string
		set  bool
	}{
		{"secret_key_file", c.SecretKeyFile != ""}, {"secret_key", c.SecretKey != ""}, {"public_key", c.PublicKey != ""},
		{"allowed_keys_file", c.AllowedKeysFile != ""}, {"allowed_keys", len(c.AllowedKeys) > 0},
	}
	for _, k := range set {
		if k.set {
			ps.add("transport.curve."+k.name, "is set but transport.curve.enabled is false, so the links would not be encrypted; set transport.curve.enabled: true or remove it")
		}
	}
}

// keyPair loads and checks the node's own key pair.
func (c CurveConfig) keyPair() (curve.KeyPair, error) {
	var kp curve.KeyPair
	var secret curve.Key
	var err error
	switch {
	case c.SecretKeyFile != "" && c.SecretKey != "":
		return kp, errors.New("set transport.curve.secret_key_file or transport.curve.secret_key, not both")
	case c.SecretKeyFile != "":
		secret, err = curve.ReadSecretKeyFile(c.SecretKeyFile)
	case c.SecretKey != "":
		if secret, err = curve.ParseKey(c.SecretKey); err != nil {
			err = fmt.Errorf("transport.curve.secret_key: %w", err)
		}
	default:
		return kp, errors.New("needs transport.curve.secret_key_file or transport.curve.secret_key (see `meshnode ctl keygen`)")
	}
	if err != nil {
		return kp, err
	}
	if kp, err = curve.KeyPairFromSecret(secret); err != nil {
		return kp, err
	}
	if c.PublicKey != "" {
		pub, err := curve.ParseKey(c.PublicKey)
		if err != nil {
			return kp, fmt.Errorf("transport.curve.public_key: %w", err)
		}
		if pub != kp.Public {
			return kp, fmt.Errorf("transport.curve.public_key %s is not the secret key's public key %s", pub, kp.Public)
		}
	}
	return kp, nil
}

// allowedKeys loads and checks the allow-list (file and inline keys).
func (c CurveConfig) allowedKeys() ([]curve.Key, error) {
	var allowed []curve.Key
	if c.AllowedKeysFile != "" {
		f, err := os.Open(c.AllowedKeysFile)
		if err != nil {
			return nil, fmt.Errorf("transport.curve.allowed_keys_file: %w", err)
		}
		defer f.Close()
		// Anyone who can write the allow-list can make this node trust their
		// key (at the next restart): refuse a world-writable one, as the
		// secret key file's mode is checked.
		if st, err := f.Stat(); err == nil && st.Mode().Perm()&0o002 != 0 {
			return nil, fmt.Errorf("transport.curve.allowed_keys_file %s has mode %#o: writable by any user, who could add a key of their own; chmod o-w", c.AllowedKeysFile, st.Mode().Perm())
		}
		if allowed, err = curve.ParseKeyList(f); err != nil {
			return nil, fmt.Errorf("transport.curve.allowed_keys_file %s: %w", c.AllowedKeysFile, err)
		}
	}
	for i, s := range c.AllowedKeys {
		k, err := curve.ParseKey(s)
		if err != nil {
			return nil, fmt.Errorf("transport.curve.allowed_keys entry %d: %w", i+1, err)
		}
		allowed = append(allowed, k)
	}
	if len(allowed) == 0 {
		return nil, errors.New("transport.curve needs trusted node keys (allowed_keys_file or allowed_keys); an empty allow-list would refuse every peer")
	}
	return allowed, nil
}
