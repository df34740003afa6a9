import { readFileSync } from 'node:fs';
import { ConfigInvalidError, type MintOptions, mintToken } from '@forge-fleet/shared';

/** Mints an agent capability token with the private key in `keyFile`. */
export async function mint(keyFile: string, options: MintOptions): Promise<string> {
  let pem: string;
  try {
    pem = readFileSync(keyFile, 'utf8');
  } catch (error) {
    throw new ConfigInvalidError('forge token mint', [`--key: cannot read ${keyFile}: ${error instanceof Error ? error.message : String(error)}`], { cause: error });
  }
  try {
    return await mintToken(pem, options);
  } catch (error) {
    throw new ConfigInvalidError('forge token mint', [`--key: ${keyFile} is not an Ed25519 private key in PKCS#8 PEM form (\`forge keys init\` writes one)`], { cause: error });
  }
}
