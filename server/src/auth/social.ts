// Owns the optional social sign-in of one provider (SOCIAL_*): a provider better-auth has built in, or any OpenID
// Connect issuer through the generic OAuth plugin; either way a provider-unverified email never gets a session.
import type { BetterAuthPlugin } from 'better-auth';
import { genericOAuth } from 'better-auth/plugins';
import { BUILT_IN_SOCIAL_PROVIDERS, type Config } from '../config.js';

export function socialSignIn(config: Config) {
  const socialPlugins: BetterAuthPlugin[] = [];
  let socialProviders: Record<
    string,
    { clientId: string; clientSecret: string; requireEmailVerification: boolean }
  > = {};
  if (config.SOCIAL_CLIENT_ID && config.SOCIAL_CLIENT_SECRET) {
    const provider = config.SOCIAL_PROVIDER;
    // better-auth reads this per provider (not from emailAndPassword): without it an account whose email the
    // provider did not verify would get a session, bypassing the contract's "verified before sign-in" rule.
    const requireEmailVerification = true;
    if (BUILT_IN_SOCIAL_PROVIDERS.has(provider) && !config.SOCIAL_ISSUER) {
      socialProviders = {
        [provider]: {
          clientId: config.SOCIAL_CLIENT_ID,
          clientSecret: config.SOCIAL_CLIENT_SECRET,
          requireEmailVerification,
        },
      };
    } else if (config.SOCIAL_ISSUER) {
      socialPlugins.push(
        genericOAuth({
          config: [
            {
              providerId: provider,
              discoveryUrl: `${config.SOCIAL_ISSUER.replace(/\/+$/, '')}/.well-known/openid-configuration`,
              clientId: config.SOCIAL_CLIENT_ID,
              clientSecret: config.SOCIAL_CLIENT_SECRET,
              scopes: ['openid', 'email', 'profile'],
              pkce: true,
              requireEmailVerification,
              // The contract's callback path; genericOAuth providers are served by the core /callback/:id route.
              redirectURI: `${config.API_BASE_URL}/auth/callback/${provider}`,
            },
          ],
        }),
      );
    }
  }
  return { socialProviders, socialPlugins };
}
