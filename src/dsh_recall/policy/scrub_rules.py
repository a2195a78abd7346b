"""Provider rules derived from detect-secrets 1.5.0 by
scripts/scrub_rules.py; do not edit by hand. (kind, secret group, pattern, flags)"""

RULES: tuple[tuple[str, int, str, int], ...] = (
    ('aws-access-key', 0, '(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}', 32),  # AWSKeyDetector
    ('aws-access-key', 1, 'aws.{0,20}?(?:key|pwd|pw|password|pass|token).{0,20}?[\\\'\\"]([0-9a-zA-Z/+]{40})[\\\'\\"]', 34),  # AWSKeyDetector
    ('azure-storage-key', 0, 'AccountKey=[a-zA-Z0-9+\\/=]{88}', 32),  # AzureStorageKeyDetector
    ('url-password', 1, "://[^:/\\?\\#\\[\\]@!\\$\\&'\\(\\)\\*\\+,;=\\s]+:([^:/\\?\\#\\[\\]@!\\$\\&'\\(\\)\\*\\+,;=\\s]+)@", 32),  # BasicAuthDetector
    ('discord-token', 0, '[MNO][a-zA-Z\\d_-]{23,25}\\.[a-zA-Z\\d_-]{6}\\.[a-zA-Z\\d_-]{27}', 32),  # DiscordBotTokenDetector
    ('github-token', 0, '(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{36}', 32),  # GitHubTokenDetector
    ('gitlab-token', 0, '(glpat|gldt|glft|glsoat|glrt)-[A-Za-z0-9_\\-]{20,50}(?!\\w)', 32),  # GitLabTokenDetector
    ('gitlab-token', 0, 'GR1348941[A-Za-z0-9_\\-]{20,50}(?!\\w)', 32),  # GitLabTokenDetector
    ('gitlab-token', 0, 'glcbt-([0-9a-fA-F]{2}_)?[A-Za-z0-9_\\-]{20,50}(?!\\w)', 32),  # GitLabTokenDetector
    ('gitlab-token', 0, 'glimt-[A-Za-z0-9_\\-]{25}(?!\\w)', 32),  # GitLabTokenDetector
    ('gitlab-token', 0, 'glptt-[A-Za-z0-9_\\-]{40}(?!\\w)', 32),  # GitLabTokenDetector
    ('gitlab-token', 0, 'glagent-[A-Za-z0-9_\\-]{50,1024}(?!\\w)', 32),  # GitLabTokenDetector
    ('gitlab-token', 0, 'gloas-[A-Za-z0-9_\\-]{64}(?!\\w)', 32),  # GitLabTokenDetector
    ('openai-key', 0, 'sk-[A-Za-z0-9-_]*[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}', 32),  # OpenAIDetector
    ('pypi-token', 0, 'pypi-AgEIcHlwaS5vcmc[A-Za-z0-9-_]{70,}', 32),  # PypiTokenDetector
    ('pypi-token', 0, 'pypi-AgENdGVzdC5weXBpLm9yZw[A-Za-z0-9-_]{70,}', 32),  # PypiTokenDetector
    ('sendgrid-key', 0, 'SG\\.[a-zA-Z0-9_-]{22}\\.[a-zA-Z0-9_-]{43}', 32),  # SendGridDetector
    ('slack-token', 0, 'xox(?:a|b|p|o|s|r)-(?:\\d+-)+[a-z0-9]+', 34),  # SlackDetector
    ('slack-token', 0, 'https://hooks\\.slack\\.com/services/T[a-zA-Z0-9_]+/B[a-zA-Z0-9_]+/[a-zA-Z0-9_]+', 98),  # SlackDetector
    ('square-secret', 0, 'sq0csp-[0-9A-Za-z\\\\\\-_]{43}', 32),  # SquareOAuthDetector
    ('stripe-key', 0, '(?:r|s)k_live_[0-9a-zA-Z]{24}', 32),  # StripeDetector
    ('telegram-token', 0, '\\d{8,10}:[0-9A-Za-z_-]{35}', 32),  # TelegramBotTokenDetector
    ('twilio-key', 0, 'AC[a-z0-9]{32}', 32),  # TwilioKeyDetector
    ('twilio-key', 0, 'SK[a-z0-9]{32}', 32),  # TwilioKeyDetector
)
