import { api, formatMoney, withQuery, type Mode, type Money } from '../api.js';
import { BarChart } from '../chart.js';
import { Empty, Loading, PageHeader, useLoad } from '../ui.js';

interface PeriodSummary {
  totalCost: Money;
  berthBilled: { compute: Money; model: Money; storage: Money; total: Money };
  providerDirect: { compute: Money; model: Money; total: Money };
}

interface DayByKind {
  date: string;
  compute: Money;
  model: Money;
  storage: Money;
  total: Money;
}

const PERIODS = [
  ['last_7_days', 'Last 7 days'],
  ['last_30_days', 'Last 30 days'],
  ['month', 'This month'],
] as const;

export function Usage(props: { mode: Mode; period: string; setPeriod: (period: string) => void }) {
  const loaded = useLoad(async () => {
    const query = { period: props.period, mode: props.mode };
    const [daily, models, summary, users] = await Promise.all([
      api<{ data: DayByKind[] }>(withQuery('/api/usage/daily-by-kind', query)),
      api<{ data: { model: string; calls: number; cost: Money }[] }>(withQuery('/api/usage/models', query)),
      api<PeriodSummary>(withQuery('/api/usage/summary', query)),
      api<{ data: { userId: string; cost: Money }[] }>(withQuery('/api/usage/users', { ...query, limit: 10 })),
    ]);
    return { daily: daily.data, models: models.data, summary, users: users.data };
  }, `${props.mode}/${props.period}`);
  return (
    <>
      <PageHeader title="Usage" intro="What your agents cost, by day, by model, and billed by Berth against paid to providers directly. Amounts are exact to the cent.">
        <label>
          Period{' '}
          <select value={props.period} onChange={(event) => props.setPeriod((event.target as HTMLSelectElement).value)}>
            {PERIODS.map(([value, label]) => (
              <option value={value}>{label}</option>
            ))}
          </select>
        </label>
      </PageHeader>
      <Loading loaded={loaded}>
        {() => {
          const { daily, models, summary, users } = loaded.data!;
          const currency = summary.totalCost.currency;
          const format = (cents: number) => formatMoney({ amount: cents, currency });
          if (summary.totalCost.amount === 0 && models.length === 0)
            return (
              <Empty title="No usage in this period">
                <p>
                  Costs appear here once agents run on {props.mode} keys: sandbox minutes, model tokens and snapshot storage. Test keys record no usage;
                  switch to live data at the top of the page.
                </p>
              </Empty>
            );
          return (
            <div class="charts">
              <BarChart
                id="chart-daily"
                title="Cost by day, by kind"
                category="Day"
                labels={daily.map((day) => day.date.slice(5))}
                stacked
                series={[
                  { label: 'Compute', values: daily.map((day) => day.compute.amount) },
                  { label: 'Models', values: daily.map((day) => day.model.amount) },
                  { label: 'Storage', values: daily.map((day) => day.storage.amount) },
                  { label: 'Total', values: daily.map((day) => day.total.amount), tableOnly: true },
                ]}
                format={format}
              />
              <BarChart
                id="chart-split"
                title="Billed by Berth and paid to providers directly"
                category="Kind"
                labels={['Compute', 'Models', 'Storage']}
                stacked
                series={[
                  { label: 'Billed by Berth', values: [summary.berthBilled.compute.amount, summary.berthBilled.model.amount, summary.berthBilled.storage.amount] },
                  { label: 'Provider-direct', values: [summary.providerDirect.compute.amount, summary.providerDirect.model.amount, 0] },
                ]}
                format={format}
              />
              <BarChart
                id="chart-models"
                title="Cost by model"
                category="Model"
                horizontal
                labels={models.map((model) => model.model)}
                series={[{ label: 'Cost', values: models.map((model) => model.cost.amount) }]}
                format={format}
              />
              <BarChart
                id="chart-users"
                title="Cost by user (the ten highest)"
                category="User"
                horizontal
                labels={users.map((user) => user.userId)}
                series={[{ label: 'Cost', values: users.map((user) => user.cost.amount) }]}
                format={format}
              />
            </div>
          );
        }}
      </Loading>
    </>
  );
}
