"""The LoRa physical layer of the simulator: link budget, reception and capture.

Received power follows the log-distance path loss model with log-normal shadowing

    RSSI = P_tx - PL(d0) - 10 * n * log10(d / d0) - X,   X ~ N(0, sigma)   [dBm]

with the defaults Bor et al. measured at 868 MHz ("Do LoRa Low-Power Wide-Area Networks
Scale?", MSWiM 2016, section 3.3: d0 = 40 m, PL(d0) = 127.41 dB, n = 2.08,
sigma = 3.57 dB). Shadowing is drawn once per link (symmetric), as it models the
obstacles between two places, not a fast fade; an optional per-frame fade can be added.

Noise floor = -174 dBm/Hz + 10 log10(BW) + NF (thermal noise plus the receiver's noise
figure, 6 dB for the SX127x per Semtech AN1200.22). SNR = RSSI - noise floor. A frame is
demodulated when its SNR is at least the SF's demodulation limit (SX1276 datasheet
table 13: -7.5 dB at SF7 down to -20 dB at SF12, 2.5 dB per SF step), i.e. the receiver
sensitivity is noise floor + limit (SF7/125 kHz: -124.5 dBm, datasheet -123 dBm).

Collisions with capture (Bor et al. 2016, section 3.4, "LoRaSim"): two frames on the
same channel that overlap in time at a receiver destroy each other unless one is at
least CAPTURE_DB stronger, in which case the stronger one survives. With more than two
frames the interference powers are summed (in mW, the usual SINR extension of the same
threshold): a frame survives iff, at every instant of its reception, its power exceeds
the sum of the powers of the other frames then on air by CAPTURE_DB. With one
interferer this is the pairwise rule exactly. Thermal noise is not added to the sum: it
is accounted for separately by the SNR limit (decodable).
"""
import math

# Bor et al. 2016, 868 MHz measurements (LoRaSim defaults).
D0_M = 40.0
PL_D0_DB = 127.41
PATH_LOSS_EXPONENT = 2.08
SHADOWING_SIGMA_DB = 3.57
# Power capture threshold, Bor et al. 2016 (section 3.4, measured: 6 dB).
CAPTURE_DB = 6.0
# SX127x receiver noise figure (Semtech AN1200.22, "LoRa Modulation Basics").
NOISE_FIGURE_DB = 6.0
THERMAL_NOISE_DBM_HZ = -174.0
# Demodulator SNR limit per spreading factor (SX1276 datasheet, table 13).
SNR_LIMIT_DB = {5: -2.5, 6: -5.0, 7: -7.5, 8: -10.0, 9: -12.5, 10: -15.0,
                11: -17.5, 12: -20.0}
# Signals weaker than capture_db + this below the sensitivity are ignored entirely: they
# cannot be received, and it takes four of them at once (+6.02 dB summed) to break the
# capture of even the weakest decodable frame. Keeps neighbour lists short.
IGNORE_MARGIN_DB = 6.0


class LinkModel:
    """Link budget of one radio plan.

    Args:
        plan: a firmware region plan (tssbfw.regions.plan): sf, bw, power.
        d0_m, pl_d0_db, exponent, sigma_db: log-distance model parameters.
        noise_figure_db: receiver noise figure.
        capture_db: capture threshold.
    Raises:
        ValueError: parameters out of range.
    """

    def __init__(self, plan, d0_m=D0_M, pl_d0_db=PL_D0_DB, exponent=PATH_LOSS_EXPONENT,
                 sigma_db=SHADOWING_SIGMA_DB, noise_figure_db=NOISE_FIGURE_DB,
                 capture_db=CAPTURE_DB, tx_power_dbm=None):
        if d0_m <= 0 or exponent <= 0 or sigma_db < 0 or capture_db < 0:
            raise ValueError("link model parameters out of range")
        if plan["sf"] not in SNR_LIMIT_DB:
            raise ValueError("no SNR limit for SF%d" % plan["sf"])
        self.d0 = float(d0_m)
        self.pl_d0 = float(pl_d0_db)
        self.exponent = float(exponent)
        self.sigma = float(sigma_db)
        self.capture_db = float(capture_db)
        self.tx_power = float(plan["power"] if tx_power_dbm is None else tx_power_dbm)
        self.noise_floor = noise_floor_dbm(plan["bw"], noise_figure_db)
        self.sensitivity = self.noise_floor + SNR_LIMIT_DB[plan["sf"]]

    def path_loss_db(self, distance_m):
        """Mean path loss at a distance (no shadowing); distances below d0 count as d0."""
        d = max(float(distance_m), self.d0)
        return self.pl_d0 + 10.0 * self.exponent * math.log10(d / self.d0)

    def mean_rssi(self, distance_m, shadow_db=0.0):
        """Received power in dBm for a link of this length and shadowing draw."""
        return self.tx_power - self.path_loss_db(distance_m) - shadow_db

    def snr(self, rssi_dbm):
        return rssi_dbm - self.noise_floor

    def decodable(self, rssi_dbm):
        """True when a lone frame at this power is demodulated."""
        return rssi_dbm >= self.sensitivity

    def relevant(self, rssi_dbm):
        """True when a signal at this power can matter at all (reception or capture)."""
        return rssi_dbm >= self.sensitivity - self.capture_db - IGNORE_MARGIN_DB

    def range_m(self):
        """Distance at which the mean RSSI equals the sensitivity (no shadowing)."""
        margin = self.tx_power - self.sensitivity - self.pl_d0
        return self.d0 * 10.0 ** (margin / (10.0 * self.exponent))


def noise_floor_dbm(bw_hz, noise_figure_db=NOISE_FIGURE_DB):
    """Thermal noise over the bandwidth plus the receiver noise figure, in dBm."""
    return THERMAL_NOISE_DBM_HZ + 10.0 * math.log10(bw_hz) + noise_figure_db


def captures(rssi_a, rssi_b, capture_db=CAPTURE_DB):
    """True when frame a survives an overlapping frame b (a stronger by capture_db)."""
    return rssi_a - rssi_b >= capture_db


def dbm_to_mw(dbm):
    return 10.0 ** (dbm / 10.0)


def survives(rssi_dbm, interferers_dbm, capture_db=CAPTURE_DB):
    """True when a frame at rssi_dbm survives these interferers on air at the same
    instant: it exceeds their summed power (mW) by capture_db. One interferer: captures()."""
    if not interferers_dbm:
        return True
    if len(interferers_dbm) == 1:   # exactly the pairwise rule, no dB/mW round trip
        return captures(rssi_dbm, interferers_dbm[0], capture_db)
    return (dbm_to_mw(rssi_dbm)
            >= sum(map(dbm_to_mw, interferers_dbm)) * 10.0 ** (capture_db / 10.0))


def overlaps(start_a, end_a, start_b, end_b):
    """True when [start_a, end_a) and [start_b, end_b) share any instant."""
    return start_a < end_b and start_b < end_a
