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
	var kp curve.KeyPair
	var secret curve.Key
	var err error
	switch {
	case c.SecretKeyFile != "" && c.SecretKey != "":
		return kp, nil, errors.New("set transport.curve.secret_key_file or transport.curve.secret_key, not both")
	case c.SecretKeyFile != "":
		secret, err = curve.ReadSecretKeyFile(c.SecretKeyFile)
	case c.SecretKey != "":
		if secret, err = curve.ParseKey(c.SecretKey); err != nil {
			err = fmt.Errorf("transport.curve.secret_key: %w", err)
		}
	default:
		return kp, nil, errors.New("needs transport.curve.secret_key_file or transport.curve.secret_key (see `meshnode ctl keygen`)")
	}
	if err != nil {
		return kp, nil, err
	}
	if kp, err = curve.KeyPairFromSecret(secret); err != nil {
		return kp, nil, err
	}
	if c.PublicKey != "" {
		pub, err := curve.ParseKey(c.PublicKey)
		if err != nil {
			return kp, nil, fmt.Errorf("transport.curve.public_key: %w", err)
		}
		if pub != kp.Public {
			return kp, nil, fmt.Errorf("transport.curve.public_key %s is not the secret key's public key %s", pub, kp.Public)
		}
	}
	var allowed []curve.Key
	if c.AllowedKeysFile != "" {
		f, err := os.Open(c.AllowedKeysFile)
		if err != nil {
			return kp, nil, fmt.Errorf("transport.curve.allowed_keys_file: %w", err)
		}
		defer f.Close()
		if allowed, err = curve.ParseKeyList(f); err != nil {
			return kp, nil, fmt.Errorf("transport.curve.allowed_keys_file %s: %w", c.AllowedKeysFile, err)
		}
	}
	for i, s := range c.AllowedKeys {
		k, err := curve.ParseKey(s)
		if err != nil {
			return kp, nil, fmt.Errorf("transport.curve.allowed_keys entry %d: %w", i+1, err)
		}
		allowed = append(allowed, k)
	}
	if len(allowed) == 0 {
		return kp, nil, errors.New("transport.curve needs trusted node keys (allowed_keys_file or allowed_keys); an empty allow-list would refuse every peer")
	}
	return kp, allowed, nil
}
